// Sharding in the parameter server's core: the shard map of a model and N, a shard's slice of the
// weights and of SGD, the Join refusals of a mismatched map, and checkpoints that belong to one
// shard.
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/model/shard_map.h"
#include "param_server/core/parameter_server.h"
#include "tests/catch.h"
#include "tests/support/subprocess.h"

namespace convoy::ps {
namespace {

ModelInfo Tiny() {
  absl::StatusOr<ModelInfo> model = DescribeModel("tiny");
  REQUIRE(model.ok());
  return *model;
}

ParameterServerOptions Shard(uint32_t index, uint32_t count) {
  ParameterServerOptions o;
  o.model = "tiny";
  o.optimizer.kind = Optimizer::kSgd;
  o.optimizer.momentum = 0;
  o.learning_rate = 0.5;
  o.num_shards = count;
  o.shard_index = index;
  return o;
}

std::unique_ptr<ParameterServer> Start(const ParameterServerOptions& o) {
  absl::StatusOr<std::unique_ptr<ParameterServer>> server = ParameterServer::Create(o);
  INFO(server.status());
  REQUIRE(server.ok());
  return *std::move(server);
}

v1::JoinRequest JoinAs(const ParameterServer& ps, uint32_t index, uint32_t count,
                       const std::string& digest) {
  v1::JoinRequest r;
  r.set_agent_id("a");
  r.set_model_fingerprint(ps.model().fingerprint);
  r.set_num_shards(count);
  r.set_shard_index(index);
  r.set_shard_map_digest(digest);
  return r;
}

TEST_CASE("A shard map covers the vector in order, balanced to one element, from model and N alone",
          "[shards]") {
  const ModelInfo tiny = Tiny();
  for (uint32_t n : {1u, 2u, 3u, 4u, 7u, 64u}) {
    absl::StatusOr<ShardMap> map = MakeShardMap(tiny, n);
    REQUIRE(map.ok());
    REQUIRE(map->num_shards() == n);
    uint64_t next = 0, smallest = UINT64_MAX, largest = 0;
    for (const ShardRange& r : map->ranges) {
      CHECK(r.begin == next);
      next = r.end;
      smallest = std::min(smallest, r.size());
      largest = std::max(largest, r.size());
    }
    CHECK(next == tiny.parameter_count);
    CHECK(largest - smallest <= 1);
    CHECK(MakeShardMap(tiny, n)->digest == map->digest);  // The same for every side that derives it.
  }
  CHECK(MakeShardMap(tiny, 2)->digest != MakeShardMap(tiny, 3)->digest);
  absl::StatusOr<ModelInfo> compact = DescribeModel("compact");
  REQUIRE(compact.ok());
  CHECK(MakeShardMap(*compact, 2)->digest != MakeShardMap(tiny, 2)->digest);
  // A tensor smaller than a shard, and shards smaller than a tensor: 64 shards of tiny cut its first
  // linear layer's weight (16384 elements) in many places.
  const ShardMap many = *MakeShardMap(tiny, 64);
  int cuts_inside_a_tensor = 0;
  for (const ShardRange& r : many.ranges) {
    bool at_slot_start = false;
    for (const ParameterSlot& slot : tiny.layout) at_slot_start |= slot.offset == r.begin;
    cuts_inside_a_tensor += at_slot_start ? 0 : 1;
  }
  CHECK(cuts_inside_a_tensor > 50);
  // More shards than parameters, or none: refused, naming both.
  absl::StatusOr<ShardMap> too_many = MakeShardMap(tiny, 20000);
  REQUIRE(!too_many.ok());
  CHECK(too_many.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(
      std::string(too_many.status().message()),
      Catch::Matchers::ContainsSubstring("16805") && Catch::Matchers::ContainsSubstring("20000"));
  CHECK(!MakeShardMap(tiny, 0).ok());
}

TEST_CASE("Shards start from their slice of the model's weights and apply SGD to it exactly",
          "[shards]") {
  const uint32_t kShards = 3;
  std::unique_ptr<ParameterServer> whole = Start(Shard(0, 1));
  std::vector<std::unique_ptr<ParameterServer>> shards;
  for (uint32_t i = 0; i < kShards; ++i) shards.push_back(Start(Shard(i, kShards)));
  const ShardMap& map = shards[0]->shard_map();
  auto assembled = [&] {
    std::vector<float> flat;
    for (const auto& s : shards) {
      const std::vector<float>& slice = s->Snapshot(v1::NETWORK_ONLINE)->values;
      flat.insert(flat.end(), slice.begin(), slice.end());
    }
    return flat;
  };
  CHECK(assembled() == whole->Snapshot(v1::NETWORK_ONLINE)->values);
  CHECK(shards[1]->model().parameter_count == map.ranges[1].size());
  CHECK(shards[1]->model().fingerprint == whole->model().fingerprint);
  // Two pushes of a gradient with a different value per element, each shard given its range.
  for (int push = 1; push <= 2; ++push) {
    std::vector<float> gradient(whole->model().parameter_count);
    for (size_t i = 0; i < gradient.size(); ++i) gradient[i] = 0.001f * ((i * 7 + push) % 13);
    PushHeader header;
    header.agent_id = "a";
    header.base_version = whole->version();
    std::vector<float> copy = gradient;
    REQUIRE(whole->Apply(header, copy).accepted);
    for (uint32_t i = 0; i < kShards; ++i) {
      std::vector<float> slice(gradient.begin() + map.ranges[i].begin,
                               gradient.begin() + map.ranges[i].end);
      header.base_version = shards[i]->version();
      REQUIRE(shards[i]->Apply(header, slice).accepted);
    }
  }
  CHECK(assembled() == whole->Snapshot(v1::NETWORK_ONLINE)->values);
  for (const auto& s : shards) CHECK(s->version() == 2);  // Versions are each shard's own.
}

TEST_CASE("A shard refuses a Join that takes it for another shard, another split or no split",
          "[shards]") {
  std::unique_ptr<ParameterServer> ps = Start(Shard(1, 2));
  const std::string digest = ps->shard_map().digest;
  absl::StatusOr<v1::JoinResponse> joined = ps->Join(JoinAs(*ps, 1, 2, digest));
  REQUIRE(joined.ok());
  CHECK(joined->shard().num_shards() == 2);
  CHECK(joined->shard().shard_index() == 1);
  CHECK(joined->shard().begin() == ps->shard_map().ranges[1].begin);
  CHECK(joined->shard().end() == ps->full_model().parameter_count);
  CHECK(joined->parameter_count() == ps->shard_map().ranges[1].size());
  CHECK(joined->shard().map_digest() == digest);
  struct Wrong {
    uint32_t index, count;
    std::string digest;
    const char* says;
  };
  for (const Wrong& w : {Wrong{0, 2, digest, "shard 0 of 2"}, Wrong{1, 3, "", "shard 1 of 3"},
                         Wrong{1, 2, "0123456789abcdef", "map 0123456789abcdef"},
                         Wrong{0, 0, "", "shard 0 of 1"}}) {
    absl::StatusOr<v1::JoinResponse> refused = ps->Join(JoinAs(*ps, w.index, w.count, w.digest));
    REQUIRE(!refused.ok());
    CHECK(refused.status().code() == absl::StatusCode::kFailedPrecondition);
    CHECK_THAT(std::string(refused.status().message()),
               Catch::Matchers::ContainsSubstring(w.says) &&
                   Catch::Matchers::ContainsSubstring("it is shard 1 of 2"));
  }
  CHECK(ps->Status().rejections().at("REJECT_REASON_SHARD_MISMATCH") == 4);
  // An unsharded server refuses an agent that expects shards, and answers one that knows none.
  std::unique_ptr<ParameterServer> whole = Start(Shard(0, 1));
  CHECK(!whole->Join(JoinAs(*whole, 0, 2, "")).ok());
  CHECK(whole->Join(JoinAs(*whole, 0, 0, "")).ok());
}

TEST_CASE("A shard's checkpoints resume only as that shard of the same split", "[shards]") {
  const std::string dir = testing::MakeTempDir("shard_ckpt");
  ParameterServerOptions o = Shard(0, 2);
  o.checkpoint_dir = dir;
  std::vector<float> saved;
  {
    std::unique_ptr<ParameterServer> ps = Start(o);
    std::vector<float> g(ps->model().parameter_count, 0.25f);
    PushHeader header;
    header.agent_id = "a";
    REQUIRE(ps->Apply(header, g).accepted);
    REQUIRE(ps->Checkpoint().ok());
    saved = ps->Snapshot(v1::NETWORK_ONLINE)->values;
  }
  for (auto [index, count] : {std::pair{0u, 3u}, std::pair{1u, 2u}, std::pair{0u, 1u}}) {
    ParameterServerOptions other = Shard(index, count);
    other.checkpoint_dir = dir;
    other.resume = true;
    absl::StatusOr<std::unique_ptr<ParameterServer>> refused = ParameterServer::Create(other);
    REQUIRE(!refused.ok());
    CHECK(refused.status().code() == absl::StatusCode::kFailedPrecondition);
    CHECK_THAT(std::string(refused.status().message()),
               Catch::Matchers::ContainsSubstring("holds shard 0 of 2") &&
                   Catch::Matchers::ContainsSubstring("--num_shards"));
  }
  o.resume = true;
  std::unique_ptr<ParameterServer> resumed = Start(o);
  CHECK(resumed->version() == 1);
  CHECK(resumed->Snapshot(v1::NETWORK_ONLINE)->values == saved);
}

TEST_CASE("A sharded run's checkpoints start a run with another number of shards", "[shards]") {
  const std::string base = testing::MakeTempDir("reshard");
  const uint32_t kOld = 3;
  std::vector<float> expected;
  {
    std::vector<std::unique_ptr<ParameterServer>> old;
    for (uint32_t i = 0; i < kOld; ++i) {
      ParameterServerOptions o = Shard(i, kOld);
      o.checkpoint_dir = absl::StrCat(base, "/shard-", i);
      old.push_back(Start(o));
    }
    const ShardMap& map = old[0]->shard_map();
    for (int push = 1; push <= 3; ++push) {
      std::vector<float> gradient(Tiny().parameter_count);
      for (size_t i = 0; i < gradient.size(); ++i) gradient[i] = 0.001f * ((i * 5 + push) % 11);
      for (uint32_t i = 0; i < kOld; ++i) {
        // Shard i takes one push fewer than the ones before it: their versions differ.
        if (push == 3 && i > 0) continue;
        std::vector<float> slice(gradient.begin() + map.ranges[i].begin,
                                 gradient.begin() + map.ranges[i].end);
        PushHeader header;
        header.agent_id = "a";
        header.base_version = old[i]->version();
        REQUIRE(old[i]->Apply(header, slice).accepted);
      }
    }
    for (const auto& s : old) {
      REQUIRE(s->Checkpoint().ok());
      const std::vector<float>& slice = s->Snapshot(v1::NETWORK_ONLINE)->values;
      expected.insert(expected.end(), slice.begin(), slice.end());
    }
  }
  // Two shards, and one whole server, start from the three shards' newest checkpoints, assembled.
  for (const uint32_t count : {2u, 1u, 4u}) {
    CAPTURE(count);
    std::vector<float> assembled;
    for (uint32_t i = 0; i < count; ++i) {
      ParameterServerOptions o = Shard(i, count);
      o.init_checkpoint = base;
      std::unique_ptr<ParameterServer> s = Start(o);
      CHECK(s->version() == 0);  // A new run.
      const std::vector<float>& slice = s->Snapshot(v1::NETWORK_ONLINE)->values;
      assembled.insert(assembled.end(), slice.begin(), slice.end());
    }
    CHECK(assembled == expected);
  }
  // One shard's own directory is not the whole model; a set with a shard missing is another split.
  ParameterServerOptions whole = Shard(0, 1);
  whole.init_checkpoint = base + "/shard-1";
  absl::StatusOr<std::unique_ptr<ParameterServer>> refused = ParameterServer::Create(whole);
  REQUIRE(!refused.ok());
  CHECK(refused.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(refused.status().message()),
             Catch::Matchers::ContainsSubstring("shard 1 of 3"));
  std::filesystem::remove_all(base + "/shard-2");
  whole.init_checkpoint = base;
  refused = ParameterServer::Create(whole);
  REQUIRE(!refused.ok());
  CHECK(refused.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(refused.status().message()),
             Catch::Matchers::ContainsSubstring("shard 0 of the 2") &&
                 Catch::Matchers::ContainsSubstring("shard 0 of 3"));
  whole.init_checkpoint = base + "/nothing-here";
  std::filesystem::create_directories(whole.init_checkpoint);
  refused = ParameterServer::Create(whole);
  REQUIRE(!refused.ok());
  CHECK(refused.status().code() == absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace convoy::ps
