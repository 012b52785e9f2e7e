#include "param_server/target_network.h"

#include <vector>

#include "tests/catch.h"

namespace convoy {
namespace {

void PublishVersion(WeightStore& store, uint64_t version) {
  store.mutable_master()[0] = static_cast<float>(version);
  store.Publish(version);
}

TEST_CASE("A fresh target is the initial weights at version 0", "[target_network]") {
  WeightStore online(std::vector<float>(2, 0.5f), 0);
  TargetNetwork target(4);
  target.Start(online.Snapshot());
  CHECK(target.version() == 0);
  CHECK(target.Snapshot()->values == std::vector<float>(2, 0.5f));
}

TEST_CASE("The target is copied again once the update frequency's minibatches are applied",
          "[target_network]") {
  WeightStore online(std::vector<float>(2, 0.0f), 0);
  TargetNetwork target(4);
  target.Start(online.Snapshot());
  PublishVersion(online, 1);
  CHECK_FALSE(target.OnApplied(3, online));
  CHECK(target.version() == 0);
  PublishVersion(online, 2);
  CHECK(target.OnApplied(5, online));
  CHECK(target.version() == 2);
  CHECK(target.Snapshot()->values[0] == 2.0f);
  // Counted from the previous copy (5), not from the multiples of 4.
  PublishVersion(online, 3);
  CHECK_FALSE(target.OnApplied(8, online));
  CHECK(target.OnApplied(9, online));
  CHECK(target.version() == 3);
}

TEST_CASE("A target saved to a checkpoint restores to the same weights, version and schedule",
          "[target_network]") {
  WeightStore online(std::vector<float>(2, 0.0f), 0);
  TargetNetwork target(4);
  target.Start(online.Snapshot());
  PublishVersion(online, 6);
  REQUIRE(target.OnApplied(6, online));
  CheckpointData data;
  target.SaveTo(data);
  CHECK(data.manifest.target_version() == 6);
  CHECK(data.manifest.minibatches_at_target() == 6);

  TargetNetwork restored(4);
  restored.Restore(data.manifest, data.target->values);
  CHECK(restored.version() == 6);
  CHECK(restored.Snapshot()->version == 6);
  CHECK(restored.Snapshot()->values == data.target->values);
  CHECK_FALSE(restored.OnApplied(9, online));
  CHECK(restored.OnApplied(10, online));
}

}  // namespace
}  // namespace convoy
