#include "param_server/core/target_network.h"

#include <memory>
#include <vector>

#include "tests/catch.h"

namespace convoy::ps {
namespace {

// The server's writer lock, held as the server holds it around its parts' calls.
class Writer {
 public:
  absl::Mutex mu;
};

void PublishVersion(WeightStore& store, uint64_t version) {
  store.mutable_master()[0] = static_cast<float>(version);
  store.Publish(version);
}

// Tells `target` of a step that brought the run to `applied_minibatches` and published `online`'s
// newest weights; returns whether the target took them.
bool Step(Writer& writer, TargetNetwork& target, const WeightStore& online,
          uint64_t applied_minibatches) {
  AppliedStep step;
  step.published = online.Snapshot();
  step.version = step.published->version;
  step.applied_minibatches = applied_minibatches;
  const uint64_t before = target.version();
  absl::MutexLock lock(&writer.mu);
  target.Applied(writer.mu, step);
  return target.version() != before;
}

TEST_CASE("A fresh target is the initial weights at version 0", "[target_network]") {
  Writer writer;
  WeightStore online(std::vector<float>(2, 0.5f), 0);
  TargetNetwork target(4);
  {
    absl::MutexLock lock(&writer.mu);
    target.Start(writer.mu, online.Snapshot());
  }
  CHECK(target.version() == 0);
  CHECK(target.Snapshot()->values == std::vector<float>(2, 0.5f));
}

TEST_CASE("The target is copied again once the update frequency's minibatches are applied",
          "[target_network]") {
  Writer writer;
  WeightStore online(std::vector<float>(2, 0.0f), 0);
  TargetNetwork target(4);
  {
    absl::MutexLock lock(&writer.mu);
    target.Start(writer.mu, online.Snapshot());
  }
  PublishVersion(online, 1);
  CHECK_FALSE(Step(writer, target, online, 3));
  CHECK(target.version() == 0);
  PublishVersion(online, 2);
  CHECK(Step(writer, target, online, 5));
  CHECK(target.version() == 2);
  CHECK(target.Snapshot()->values[0] == 2.0f);
  // Counted from the previous copy (5), not from the multiples of 4.
  PublishVersion(online, 3);
  CHECK_FALSE(Step(writer, target, online, 8));
  CHECK(Step(writer, target, online, 9));
  CHECK(target.version() == 3);
}

TEST_CASE("A soft target moves tau of the way toward the online weights at each copy, and no more",
          "[target_network]") {
  Writer writer;
  WeightStore online(std::vector<float>{0.0f, 8.0f}, 0);
  TargetNetwork target(2, 0.25);
  {
    absl::MutexLock lock(&writer.mu);
    target.Start(writer.mu, online.Snapshot());
  }
  const std::shared_ptr<const WeightSnapshot> held = target.Snapshot();  // A pull in flight.
  online.mutable_master()[0] = 4.0f;
  online.mutable_master()[1] = 0.0f;
  online.Publish(1);
  CHECK_FALSE(Step(writer, target, online, 1));  // Not due: the target stays where it was.
  CHECK(target.Snapshot()->values == std::vector<float>{0.0f, 8.0f});
  REQUIRE(Step(writer, target, online, 2));
  CHECK(target.version() == 1);
  CHECK(target.Snapshot()->version == 1);
  // 0 + (4 - 0) / 4 and 8 - 8 / 4, into a snapshot of its own: neither the one a pull holds nor the
  // online weights are written.
  CHECK(target.Snapshot()->values == std::vector<float>{1.0f, 6.0f});
  CHECK(held->values == std::vector<float>{0.0f, 8.0f});
  CHECK(online.Snapshot()->values == std::vector<float>{4.0f, 0.0f});
  // The next copy starts from where the last one left the target.
  PublishVersion(online, 2);  // {2, 0}
  REQUIRE(Step(writer, target, online, 4));
  CHECK(target.Snapshot()->values == std::vector<float>{1.25f, 4.5f});  // 1 + 1 / 4, 6 - 6 / 4.
}

TEST_CASE("A target saved to a checkpoint restores to the same weights, version and schedule",
          "[target_network]") {
  Writer writer;
  WeightStore online(std::vector<float>(2, 0.0f), 0);
  TargetNetwork target(4);
  {
    absl::MutexLock lock(&writer.mu);
    target.Start(writer.mu, online.Snapshot());
  }
  PublishVersion(online, 6);
  REQUIRE(Step(writer, target, online, 6));
  CheckpointData data;
  {
    absl::MutexLock lock(&writer.mu);
    REQUIRE(target.SaveTo(writer.mu, data).ok());
  }
  CHECK(data.manifest.target_version() == 6);
  CHECK(data.manifest.minibatches_at_target() == 6);

  TargetNetwork restored(4);
  LoadedCheckpoint checkpoint;
  checkpoint.manifest = data.manifest;
  checkpoint.target = data.target->values;
  {
    absl::MutexLock lock(&writer.mu);
    REQUIRE(restored.Restore(writer.mu, checkpoint).ok());
  }
  CHECK(restored.version() == 6);
  CHECK(restored.Snapshot()->version == 6);
  CHECK(restored.Snapshot()->values == data.target->values);
  PublishVersion(online, 7);
  CHECK_FALSE(Step(writer, restored, online, 9));
  CHECK(Step(writer, restored, online, 10));
}

}  // namespace
}  // namespace convoy::ps
