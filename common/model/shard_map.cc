#include "common/model/shard_map.h"

#include "absl/strings/str_cat.h"
#include "common/support/sha256.h"

namespace convoy {

absl::StatusOr<ShardMap> MakeShardMap(const ModelInfo& model, uint32_t num_shards) {
  const uint64_t n = model.parameter_count;
  if (num_shards == 0 || num_shards > n) {
    return absl::InvalidArgumentError(absl::StrCat("--num_shards must be between 1 and model ",
                                                   model.spec.name, "'s ", n,
                                                   " parameters, got ", num_shards));
  }
  ShardMap map;
  std::string canonical = absl::StrCat(model.fingerprint, "|", num_shards);
  for (uint32_t i = 0; i < num_shards; ++i) {
    ShardRange range;
    range.begin = i * n / num_shards;  // n < 2^40 and N < 2^20 in practice: no overflow.
    range.end = (i + 1ull) * n / num_shards;
    absl::StrAppend(&canonical, "|", range.begin, "-", range.end);
    map.ranges.push_back(range);
  }
  map.digest = Sha256Hex(canonical).substr(0, 16);
  return map;
}

ModelInfo ShardModel(const ModelInfo& model, const ShardMap& map, uint32_t index) {
  if (map.num_shards() == 1) return model;
  const ShardRange& range = map.ranges[index];
  ModelInfo shard;
  shard.spec = model.spec;
  shard.fingerprint = model.fingerprint;
  shard.parameter_count = range.size();
  ParameterSlot slot;
  slot.name = absl::StrCat("shard_", index, "_of_", map.num_shards());
  slot.shape = {static_cast<int64_t>(range.size())};
  slot.offset = 0;
  slot.numel = range.size();
  shard.layout = {slot};
  return shard;
}

std::string DescribeShard(const ShardMap& map, uint32_t index) {
  const ShardRange& range = map.ranges[index];
  return absl::StrCat("shard ", index, " of ", map.num_shards(), " (elements ", range.begin, "-",
                      range.end, ", map ", map.digest, ")");
}

}  // namespace convoy
