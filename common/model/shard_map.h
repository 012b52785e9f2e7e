// ShardMap: how a sharded parameter server splits a model's flat parameter vector.
//
// N shards serve N contiguous ranges, balanced by element count: shard i holds
// [floor(i * n / N), floor((i + 1) * n / N)), so sizes differ by at most one element and a tensor may
// span shards (as MXNet splits large arrays into pieces). The map is a function of the model and N
// alone: every agent and every shard derive the same one, and its digest names it, so two sides that
// disagree (another N, another model) can say so.
#ifndef CONVOY_COMMON_MODEL_SHARD_MAP_H_
#define CONVOY_COMMON_MODEL_SHARD_MAP_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model/model_registry.h"

namespace convoy {

struct ShardRange {
  uint64_t begin = 0;
  uint64_t end = 0;  // One past the last element.
  uint64_t size() const { return end - begin; }
};

struct ShardMap {
  std::vector<ShardRange> ranges;  // ranges[i] is shard i's; together they cover the vector in order.
  std::string digest;              // 16 hex digits of SHA-256 over the fingerprint, N and the ranges.
  uint32_t num_shards() const { return static_cast<uint32_t>(ranges.size()); }
};

// Errors: INVALID_ARGUMENT when num_shards is 0 or more than the model's parameters (naming both).
absl::StatusOr<ShardMap> MakeShardMap(const ModelInfo& model, uint32_t num_shards);

// What shard `index` of `map` serves, as a model of its own for the server's buffers, wire checks and
// checkpoints: the model's spec and fingerprint, parameter_count the range's size, and one layout slot
// "shard_<index>_of_<N>" holding the range (a single-shard map gives back the model unchanged).
ModelInfo ShardModel(const ModelInfo& model, const ShardMap& map, uint32_t index);

// "shard 1 of 2 (elements 95090-190181, map 3f9c...)": how errors and logs name a shard.
std::string DescribeShard(const ShardMap& map, uint32_t index);

}  // namespace convoy

#endif  // CONVOY_COMMON_MODEL_SHARD_MAP_H_
