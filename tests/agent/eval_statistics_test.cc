// Evaluation statistics: outcomes by kind with Wilson intervals, means with Student's t intervals,
// metres per infraction with a bootstrap interval, and the table convoy_eval prints.
#include "agent/eval_statistics.h"

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/evaluation.h"
#include "tests/catch.h"

namespace convoy {
namespace {

EpisodeRecord Episode(TerminationReason reason, double distance_m, double total_return,
                      std::string collided_with = "") {
  EpisodeRecord record;
  record.reason = reason;
  record.distance_m = distance_m;
  record.total_return = total_return;
  record.collided = reason == TerminationReason::kCollision;
  record.collided_with = std::move(collided_with);
  return record;
}

TEST_CASE("Wilson intervals hold the textbook values, also at none and at all", "[evaluation]") {
  const Interval half = WilsonInterval(5, 10);
  CHECK(half.estimate == Approx(0.5));
  CHECK(half.low == Approx(0.2366).margin(1e-4));
  CHECK(half.high == Approx(0.7634).margin(1e-4));
  const Interval none = WilsonInterval(0, 10);
  CHECK(none.low == 0.0);
  CHECK(none.high == Approx(0.2775).margin(1e-4));
  const Interval all = WilsonInterval(100, 100);
  CHECK(all.low == Approx(0.9630).margin(1e-4));
  CHECK(all.high == 1.0);
}

TEST_CASE("A mean's interval is Student's t", "[evaluation]") {
  // Mean 3, standard error sqrt(2.5 / 5), t(4 degrees of freedom, 0.975) = 2.7764.
  const Interval i = MeanInterval({1, 2, 3, 4, 5});
  CHECK(i.estimate == Approx(3.0));
  CHECK(i.low == Approx(3.0 - 2.7764 * std::sqrt(0.5)).margin(1e-3));
  CHECK(i.high == Approx(3.0 + 2.7764 * std::sqrt(0.5)).margin(1e-3));
  const Interval one = MeanInterval({7});
  CHECK((one.estimate == 7 && one.low == 7 && one.high == 7));
}

TEST_CASE("An episode's outcome says what the car hit", "[evaluation]") {
  CHECK(OutcomeOf(Episode(TerminationReason::kTimeLimit, 1, 1)) == EpisodeOutcome::kCompleted);
  CHECK(OutcomeOf(Episode(TerminationReason::kCollision, 1, 1, "Curb")) ==
        EpisodeOutcome::kCollisionCurb);
  CHECK(OutcomeOf(Episode(TerminationReason::kCollision, 1, 1, "ParkedCar_12")) ==
        EpisodeOutcome::kCollisionParkedCar);
  CHECK(OutcomeOf(Episode(TerminationReason::kCollision, 1, 1, "SM_Fence")) ==
        EpisodeOutcome::kCollisionOther);
  CHECK(OutcomeOf(Episode(TerminationReason::kOffCenterLine, 1, 1)) ==
        EpisodeOutcome::kOffCenterLine);
  CHECK(OutcomeOf(Episode(TerminationReason::kTooSlow, 1, 1)) == EpisodeOutcome::kTooSlow);
}

TEST_CASE("Statistics count outcomes and metres per infraction, reproducibly", "[evaluation]") {
  const EvalSummary summary = SummaryOf({
      Episode(TerminationReason::kTimeLimit, 100, 50),
      Episode(TerminationReason::kTimeLimit, 100, 50),
      Episode(TerminationReason::kCollision, 50, 20, "Curb"),
      Episode(TerminationReason::kTooSlow, 10, 0),
  });
  const EvalStatistics stats = StatisticsOf(summary);
  CHECK(stats.episodes == 4);
  CHECK(stats.outcome_rate[static_cast<int>(EpisodeOutcome::kCompleted)].estimate == 0.5);
  CHECK(stats.outcome_rate[static_cast<int>(EpisodeOutcome::kCollisionCurb)].estimate == 0.25);
  CHECK(stats.outcome_rate[static_cast<int>(EpisodeOutcome::kTooSlow)].estimate == 0.25);
  CHECK(stats.outcome_rate[static_cast<int>(EpisodeOutcome::kCollisionParkedCar)].estimate == 0);
  CHECK(stats.infractions == 2);
  CHECK(stats.metres_per_infraction.estimate == Approx(130.0));
  CHECK(stats.metres_per_infraction.low <= 130.0);
  CHECK(stats.metres_per_infraction.high >= 130.0);
  CHECK(stats.mean_return.estimate == Approx(30.0));
  const EvalStatistics again = StatisticsOf(summary);
  CHECK(again.metres_per_infraction.low == stats.metres_per_infraction.low);
  CHECK(again.metres_per_infraction.high == stats.metres_per_infraction.high);

  // No infraction: the metres driven are a lower bound, with no upper one.
  const EvalStatistics clean = StatisticsOf(SummaryOf({
      Episode(TerminationReason::kTimeLimit, 120, 60),
      Episode(TerminationReason::kTimeLimit, 80, 40),
  }));
  CHECK(clean.infractions == 0);
  CHECK(clean.metres_per_infraction.estimate == Approx(200.0));
  CHECK(clean.metres_per_infraction.low == Approx(200.0));
  CHECK(std::isinf(clean.metres_per_infraction.high));
}

TEST_CASE("An evaluation's table gives every outcome with its interval, for both policies",
          "[evaluation]") {
  EnvironmentSpec spec;
  spec.env.max_epoch_runtime_sec = 10;
  spec.parked_cars = 40;
  absl::StatusOr<std::unique_ptr<GreedyEvaluator>> evaluator =
      GreedyEvaluator::Create("compact", spec);
  REQUIRE(evaluator.ok());
  absl::StatusOr<EvalSummary> random = (*evaluator)->Random(8);
  REQUIRE(random.ok());
  const EvalStatistics stats = StatisticsOf(*random);
  double total = 0;
  for (const Interval& rate : stats.outcome_rate) {
    CHECK(rate.low <= rate.estimate);
    CHECK(rate.estimate <= rate.high);
    total += rate.estimate;
  }
  CHECK(total == Approx(1.0));
  CHECK(stats.outcome_rate[static_cast<int>(EpisodeOutcome::kCompleted)].estimate ==
        Approx(random->full_episodes / 8.0));
  int collided = 0;
  for (const EpisodeRecord& e : random->episodes) {
    // Every collision names what was hit.
    if (e.collided) {
      ++collided;
      CHECK_FALSE(e.collided_with.empty());
    }
  }
  const double collision_rate =
      stats.outcome_rate[static_cast<int>(EpisodeOutcome::kCollisionCurb)].estimate +
      stats.outcome_rate[static_cast<int>(EpisodeOutcome::kCollisionParkedCar)].estimate +
      stats.outcome_rate[static_cast<int>(EpisodeOutcome::kCollisionOther)].estimate;
  CHECK(collision_rate == Approx(collided / 8.0));
  CHECK(collided == random->collisions);
  const std::string table = FormatComparison(*random, *random);
  CHECK_THAT(table, Catch::Matchers::ContainsSubstring("95% CI over 8 episodes") &&
                        Catch::Matchers::ContainsSubstring("collision: parked car") &&
                        Catch::Matchers::ContainsSubstring(
                            absl::StrCat("RESULT infractions=", stats.infractions, "\n")) &&
                        Catch::Matchers::ContainsSubstring("RESULT random_completed_ci_high="));
}

}  // namespace
}  // namespace convoy
