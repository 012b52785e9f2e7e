#include <cmath>

#include "common/settings/exploration.h"
#include "param_server/core/staleness_policy.h"
#include "tests/catch.h"

namespace convoy::ps {
namespace {

using Kind = StalenessDecision::Kind;

TEST_CASE("Pushes within max_staleness are applied, older ones rejected as stale", "[staleness]") {
  StalenessPolicy policy(/*max_staleness=*/2, /*lr_scaling=*/false);
  CHECK(policy.Decide(10, 10).kind == Kind::kApply);
  CHECK(policy.Decide(10, 8).kind == Kind::kApply);
  CHECK(policy.Decide(10, 8).staleness == 2);
  CHECK(policy.Decide(10, 7).kind == Kind::kRejectStale);
  CHECK(policy.Decide(10, 7).staleness == 3);
  CHECK(policy.Decide(10, 8).lr_scale == 1.0);
}

TEST_CASE("Negative max_staleness accepts any age", "[staleness]") {
  StalenessPolicy policy(-1, false);
  CHECK(policy.Decide(1000000, 0).kind == Kind::kApply);
}

TEST_CASE("A push from ahead of the server's version is rejected as ahead", "[staleness]") {
  StalenessPolicy policy(-1, false);
  CHECK(policy.Decide(5, 6).kind == Kind::kRejectAhead);
}

TEST_CASE("Staleness LR scaling applies lr / (1 + s)", "[staleness]") {
  StalenessPolicy policy(-1, true);
  CHECK(policy.Decide(10, 10).lr_scale == 1.0);
  CHECK(policy.Decide(10, 7).lr_scale == Approx(0.25));
}

TEST_CASE("Global epsilon decays per update down to its floor", "[exploration]") {
  ExplorationOptions o;
  o.start_epsilon = 1.0;
  o.min_epsilon = 0.5;
  o.per_iter_epsilon_reduction = 0.2;
  ExplorationSchedule schedule(o);
  CHECK(schedule.EpsilonFor(3) == 1.0);
  schedule.OnUpdateApplied();
  CHECK(schedule.global_epsilon() == Approx(0.8));
  schedule.OnUpdateApplied();
  schedule.OnUpdateApplied();
  CHECK(schedule.global_epsilon() == Approx(0.5));
  CHECK(schedule.EpsilonFor(0) == Approx(0.5));
}

TEST_CASE("Ape-X gives each agent a fixed epsilon from its index", "[exploration]") {
  ExplorationOptions o;
  o.mode = ExplorationMode::kApex;
  o.apex_base_epsilon = 0.4;
  o.apex_alpha = 7;
  o.apex_num_agents = 3;
  ExplorationSchedule schedule(o);
  CHECK(schedule.EpsilonFor(0) == Approx(0.4));
  CHECK(schedule.EpsilonFor(1) == Approx(std::pow(0.4, 1 + 7 * 0.5)));
  CHECK(schedule.EpsilonFor(2) == Approx(std::pow(0.4, 8)));
  schedule.OnUpdateApplied();
  CHECK(schedule.EpsilonFor(0) == Approx(0.4));  // Fixed: updates do not change it.
}

TEST_CASE("Exploration modes parse from their names and nothing else", "[exploration]") {
  CHECK(*ParseExplorationMode("global") == ExplorationMode::kGlobal);
  CHECK(*ParseExplorationMode("apex") == ExplorationMode::kApex);
  for (ExplorationMode mode : {ExplorationMode::kGlobal, ExplorationMode::kApex}) {
    CHECK(*ParseExplorationMode(ExplorationModeName(mode)) == mode);
  }
  const absl::StatusOr<ExplorationMode> unknown = ParseExplorationMode("Global");
  CHECK(unknown.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(unknown.status().message() == "must be global or apex, got 'Global'");
}

TEST_CASE(
    "The target network is refreshed once enough minibatches were applied since the last copy",
    "[exploration][target]") {
  CHECK_FALSE(TargetRefreshDue(0, 0, 4));
  CHECK_FALSE(TargetRefreshDue(3, 0, 4));
  CHECK(TargetRefreshDue(4, 0, 4));
  CHECK(TargetRefreshDue(9, 4, 4));
  CHECK_FALSE(TargetRefreshDue(7, 4, 4));
  CHECK(TargetRefreshDue(1, 0, 1));
}

TEST_CASE("The learning rate falls along half a cosine to its final share and stays there",
          "[exploration][learning_rate]") {
  CHECK(LearningRateScale(0, 0, 0.1) == 1.0);  // Off: a constant rate.
  CHECK(LearningRateScale(1000000, 0, 0.1) == 1.0);
  CHECK(LearningRateScale(0, 100, 0.1) == 1.0);
  CHECK(LearningRateScale(50, 100, 0.1) == Approx(0.55));  // Halfway: the mean of both ends.
  CHECK(LearningRateScale(25, 100, 0.0) == Approx(0.5 + 0.5 * std::cos(0.25 * std::acos(-1.0))));
  CHECK(LearningRateScale(100, 100, 0.1) == 0.1);
  CHECK(LearningRateScale(5000, 100, 0.1) == 0.1);
  double previous = 1.0;
  for (uint64_t m = 1; m <= 100; ++m) {
    const double scale = LearningRateScale(m, 100, 0.25);
    CHECK(scale < previous);
    CHECK(scale >= 0.25);
    previous = scale;
  }
}

TEST_CASE("The fall over minutes is the same cosine, on the training clock",
          "[exploration][learning_rate]") {
  CHECK(LearningRateScaleOverTime(absl::Minutes(5), absl::ZeroDuration(), 0.1) == 1.0);  // Off.
  CHECK(LearningRateScaleOverTime(absl::ZeroDuration(), absl::Minutes(10), 0.1) == 1.0);
  CHECK(LearningRateScaleOverTime(absl::Minutes(5), absl::Minutes(10), 0.1) == Approx(0.55));
  CHECK(LearningRateScaleOverTime(absl::Seconds(150), absl::Minutes(10), 0.0) ==
        Approx(LearningRateScale(25, 100, 0.0)));
  CHECK(LearningRateScaleOverTime(absl::Minutes(10), absl::Minutes(10), 0.1) == 0.1);
  CHECK(LearningRateScaleOverTime(absl::Hours(2), absl::Minutes(10), 0.1) == 0.1);
}

TEST_CASE("Bad exploration options are refused", "[exploration]") {
  ExplorationOptions o;
  o.min_epsilon = 0.9;
  o.start_epsilon = 0.5;
  CHECK(ValidateExplorationOptions(o).code() == absl::StatusCode::kInvalidArgument);
  o = ExplorationOptions();
  o.per_iter_epsilon_reduction = -1;
  CHECK(ValidateExplorationOptions(o).code() == absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace convoy::ps
