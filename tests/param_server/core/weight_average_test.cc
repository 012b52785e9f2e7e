#include "param_server/core/weight_average.h"

#include <cmath>
#include <vector>

#include "absl/time/clock.h"
#include "param_server/core/parameter_server.h"
#include "tests/catch.h"

namespace convoy::ps {
namespace {

WeightSnapshot At(uint64_t version, std::vector<float> values) {
  WeightSnapshot s;
  s.version = version;
  s.values = std::move(values);
  return s;
}

TEST_CASE("The average is the plain mean until it has covered its horizon", "[average]") {
  WeightAverage average(/*horizon=*/100, {0.0f, 0.0f}, /*version=*/0, /*applied_minibatches=*/0);
  // The first fold replaces the initial weights outright.
  REQUIRE(average.Fold(At(1, {3.0f, -3.0f}), 10));
  CHECK(average.Snapshot()->values == std::vector<float>{3.0f, -3.0f});
  CHECK(average.Snapshot()->version == 1);
  // 10 minibatches at 3, then 30 at 7: their minibatch-weighted mean, 6.
  REQUIRE(average.Fold(At(2, {7.0f, 1.0f}), 40));
  CHECK(average.Snapshot()->values[0] == Approx(6.0));
  CHECK(average.Snapshot()->values[1] == Approx(0.0));
  CHECK(average.covered() == 40);
  CHECK(average.minibatches_at_fold() == 40);
}

TEST_CASE("Past the horizon, weights fall by (1 - 1/horizon) per minibatch, however folded",
          "[average]") {
  constexpr uint64_t kHorizon = 50;
  // One fold of 40 minibatches and four folds of 10 end at the same average.
  WeightAverage once(kHorizon, {0.0f}, 0, 0), often(kHorizon, {0.0f}, 0, 0);
  REQUIRE(once.Fold(At(1, {1.0f}), 500));
  REQUIRE(often.Fold(At(1, {1.0f}), 500));
  REQUIRE(once.Fold(At(2, {5.0f}), 540));
  for (uint64_t v = 2; v <= 5; ++v) REQUIRE(often.Fold(At(v, {5.0f}), 500 + 10 * (v - 1)));
  const double kept = std::pow(1.0 - 1.0 / kHorizon, 40);
  CHECK(once.Snapshot()->values[0] == Approx(1.0 * kept + 5.0 * (1 - kept)));
  CHECK(often.Snapshot()->values[0] == Approx(once.Snapshot()->values[0]).epsilon(1e-6));
  CHECK(WeightAverage::FoldWeight(kHorizon, 1000, 40) == Approx(1 - kept));
  CHECK(WeightAverage::FoldWeight(kHorizon, 0, 7) == 1.0);
  CHECK(WeightAverage::FoldWeight(kHorizon, 1000, 0) == 0.0);
}

TEST_CASE("A fold of the same version, or of no new minibatches, changes nothing", "[average]") {
  WeightAverage average(10, {1.0f}, 4, 8);
  CHECK_FALSE(average.Fold(At(4, {9.0f}), 12));
  CHECK_FALSE(average.Fold(At(5, {9.0f}), 8));
  CHECK_FALSE(average.Fold(At(6, {9.0f, 9.0f}), 20));  // Another size.
  CHECK(average.Snapshot()->values == std::vector<float>{1.0f});
  CHECK(average.Snapshot()->version == 4);
}

TEST_CASE("A restored average continues exactly; one of another size is refused", "[average]") {
  WeightAverage a(20, {0.0f, 0.0f}, 0, 0);
  REQUIRE(a.Fold(At(1, {1.0f, 2.0f}), 30));
  REQUIRE(a.Fold(At(2, {4.0f, -2.0f}), 45));
  WeightAverage b(20, {9.0f, 9.0f}, 2, 45);
  REQUIRE(b.Restore(a.Snapshot()->values, 2, a.covered(), a.minibatches_at_fold()).ok());
  CHECK(b.Snapshot()->values == a.Snapshot()->values);
  REQUIRE(a.Fold(At(3, {0.5f, 0.25f}), 60));
  REQUIRE(b.Fold(At(3, {0.5f, 0.25f}), 60));
  CHECK(b.Snapshot()->values == a.Snapshot()->values);
  const absl::Status wrong = b.Restore({1.0f}, 3, 60, 60);
  CHECK(wrong.code() == absl::StatusCode::kInvalidArgument);
  CHECK(b.Snapshot()->values == a.Snapshot()->values);  // Unchanged.
}

ParameterServerOptions Tiny() {
  ParameterServerOptions o;
  o.model = "tiny";
  o.optimizer.kind = Optimizer::kSgd;
  o.optimizer.momentum = 0;
  o.learning_rate = 1.0;
  o.average_horizon = 1000;
  return o;
}

TEST_CASE("An average saved into a checkpoint and restored from it continues as the original",
          "[average]") {
  WeightAverage original(/*horizon=*/20, {0.0f, 0.0f}, 0, 0);
  REQUIRE(original.Fold(At(3, {2.0f, 4.0f}), 7));
  REQUIRE(original.Fold(At(5, {6.0f, -2.0f}), 30));
  CheckpointData data;
  original.SaveTo(data);
  REQUIRE(data.average != nullptr);
  CHECK(data.manifest.average_version() == 5);
  CHECK(data.manifest.average_minibatches() == original.covered());
  CHECK(data.manifest.minibatches_at_average() == 30);

  WeightAverage restored(/*horizon=*/20, {0.0f, 0.0f}, 0, 0);
  REQUIRE(restored.Restore(data.manifest, data.average->values).ok());
  REQUIRE(original.Fold(At(9, {1.0f, 1.0f}), 45));
  REQUIRE(restored.Fold(At(9, {1.0f, 1.0f}), 45));
  CHECK(restored.Snapshot()->values == original.Snapshot()->values);
  CHECK(restored.covered() == original.covered());
}

TEST_CASE("The server's averaged network follows its applied minibatches", "[average]") {
  auto server = *ParameterServer::Create(Tiny());
  const std::vector<float> initial = server->Snapshot(v1::NETWORK_ONLINE)->values;
  CHECK(server->Snapshot(v1::NETWORK_AVERAGE)->values == initial);
  CHECK_FALSE(server->FoldAverage());  // Nothing applied yet.
  // Two pushes of 2 minibatches each, each moving every weight by -1 (SGD, lr 1, gradient 1).
  std::vector<float> g(initial.size(), 1.0f);
  REQUIRE(server->Apply("a", 0, 2, g).accepted);
  REQUIRE(server->FoldAverage());
  std::vector<float> g2(initial.size(), 1.0f);
  REQUIRE(server->Apply("a", 1, 2, g2).accepted);
  REQUIRE(server->FoldAverage());
  std::shared_ptr<const WeightSnapshot> average = server->Snapshot(v1::NETWORK_AVERAGE);
  CHECK(average->version == 2);
  // The mean of (w0 - 1) over 2 minibatches and (w0 - 2) over 2: w0 - 1.5.
  for (size_t i = 0; i < initial.size(); ++i) CHECK(average->values[i] == Approx(initial[i] - 1.5));
}

// Waits (bounded) until the background task has folded `version` into the average.
bool FoldedBy(const ParameterServer& server, uint64_t version) {
  for (int i = 0; i < 500; ++i) {
    if (server.Snapshot(v1::NETWORK_AVERAGE)->version == version) return true;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return false;
}

TEST_CASE("The background task folds every version it sees", "[average]") {
  ParameterServerOptions o = Tiny();
  o.average_every = absl::Milliseconds(5);
  auto server = *ParameterServer::Create(o);
  const std::vector<float> initial = server->Snapshot(v1::NETWORK_ONLINE)->values;
  server->StartPeriodicTasks();
  std::vector<float> g(initial.size(), 1.0f);
  REQUIRE(server->Apply("a", 0, 2, g).accepted);
  REQUIRE(FoldedBy(*server, 1));
  std::vector<float> g2(initial.size(), 1.0f);
  REQUIRE(server->Apply("a", 1, 2, g2).accepted);
  REQUIRE(FoldedBy(*server, 2));
  // Both versions were folded (one fold of version 2 alone would give w0 - 2).
  std::shared_ptr<const WeightSnapshot> average = server->Snapshot(v1::NETWORK_AVERAGE);
  for (size_t i = 0; i < initial.size(); ++i) CHECK(average->values[i] == Approx(initial[i] - 1.5));
  CHECK_FALSE(server->FoldAverage());  // Nothing new since.
}

TEST_CASE("A server with averaging off serves no averaged network", "[average]") {
  ParameterServerOptions o = Tiny();
  o.average_horizon = 0;
  auto server = *ParameterServer::Create(o);
  CHECK(server->Snapshot(v1::NETWORK_AVERAGE) == nullptr);
  CHECK_FALSE(server->FoldAverage());
}

}  // namespace
}  // namespace convoy::ps
