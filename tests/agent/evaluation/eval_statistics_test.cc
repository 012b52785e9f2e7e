// Evaluation statistics: outcomes by kind with Wilson intervals, means with Student's t intervals,
// metres per infraction with a bootstrap interval, and the table convoy_eval prints.
#include "agent/evaluation/eval_statistics.h"

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/evaluation/evaluation.h"
#include "tests/catch.h"

namespace convoy::agent {
namespace {

EpisodeRecord Episode(sim::TerminationReason reason, double distance_m, double total_return,
                      std::string collided_with = "") {
  EpisodeRecord record;
  record.reason = reason;
  record.distance_m = distance_m;
  record.total_return = total_return;
  record.collided = reason == sim::TerminationReason::kCollision;
  record.collided_with = std::move(collided_with);
  // The cookbook's task: the time limit is success.
  record.completed = reason == sim::TerminationReason::kTimeLimit;
  record.route_completion = record.completed ? 1.0 : 0.5;
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

TEST_CASE("A score's interval stays in [0, 1] and is not a point at a perfect run",
          "[evaluation]") {
  // 100 perfect episodes: t's interval would be the point 1; Wilson's for 100 of 100.
  const Interval perfect = BoundedMeanInterval(std::vector<double>(100, 1.0));
  CHECK(perfect.estimate == 1.0);
  CHECK(perfect.low == Approx(0.9630).margin(1e-4));
  CHECK(perfect.high == 1.0);
  const Interval none = BoundedMeanInterval(std::vector<double>(100, 0.0));
  CHECK(none.low == Approx(0.0).margin(1e-12));
  CHECK(none.high == Approx(1.0 - 0.9630).margin(1e-4));
  // 99 perfect and one at 0.5: Student's t, whose high end (1.005) is cut to 1.
  std::vector<double> nearly(99, 1.0);
  nearly.push_back(0.5);
  const Interval cut = BoundedMeanInterval(nearly);
  const Interval t = MeanInterval(nearly);
  CHECK(cut.estimate == Approx(0.995));
  CHECK(t.high > 1.0);
  CHECK(cut.high == 1.0);
  CHECK(cut.low == Approx(t.low));
  // Inside (0, 1) with spread, it is Student's t unchanged.
  const Interval middle = BoundedMeanInterval({0.2, 0.4, 0.6, 0.8});
  const Interval middle_t = MeanInterval({0.2, 0.4, 0.6, 0.8});
  CHECK((middle.low == middle_t.low && middle.high == middle_t.high));
}

TEST_CASE("An episode's outcome says what the car hit", "[evaluation]") {
  CHECK(OutcomeOf(Episode(sim::TerminationReason::kTimeLimit, 1, 1)) == EpisodeOutcome::kCompleted);
  CHECK(OutcomeOf(Episode(sim::TerminationReason::kCollision, 1, 1, "Curb")) ==
        EpisodeOutcome::kCollisionCurb);
  CHECK(OutcomeOf(Episode(sim::TerminationReason::kCollision, 1, 1, "ParkedCar_12")) ==
        EpisodeOutcome::kCollisionParkedCar);
  CHECK(OutcomeOf(Episode(sim::TerminationReason::kCollision, 1, 1, "StalledCar_3")) ==
        EpisodeOutcome::kCollisionStalledCar);
  CHECK(OutcomeOf(Episode(sim::TerminationReason::kCollision, 1, 1, "SM_Fence")) ==
        EpisodeOutcome::kCollisionOther);
  CHECK(OutcomeOf(Episode(sim::TerminationReason::kOffCenterLine, 1, 1)) ==
        EpisodeOutcome::kOffCenterLine);
  CHECK(OutcomeOf(Episode(sim::TerminationReason::kTooSlow, 1, 1)) == EpisodeOutcome::kTooSlow);
  CHECK(OutcomeOf(Episode(sim::TerminationReason::kCollision, 1, 1, "TrafficCar_3")) ==
        EpisodeOutcome::kCollisionVehicle);
  // With a route, the time limit before its end is a time-out, and its end a completion.
  EpisodeRecord late = Episode(sim::TerminationReason::kTimeLimit, 300, 1);
  late.completed = false;
  CHECK(OutcomeOf(late) == EpisodeOutcome::kTimedOut);
  EpisodeRecord arrived = Episode(sim::TerminationReason::kCompleted, 500, 1);
  arrived.completed = true;
  CHECK(OutcomeOf(arrived) == EpisodeOutcome::kCompleted);
}

TEST_CASE("The driving score is route completion times CARLA's penalty for the infraction",
          "[evaluation]") {
  EpisodeRecord vehicle = Episode(sim::TerminationReason::kCollision, 200, 1, "TrafficCar_1");
  vehicle.route_completion = 0.4;
  CHECK(DrivingScore(vehicle) == Approx(0.4 * 0.60));
  EpisodeRecord parked = Episode(sim::TerminationReason::kCollision, 200, 1, "ParkedCar_2");
  parked.route_completion = 0.4;
  CHECK(DrivingScore(parked) == Approx(0.4 * 0.65));
  EpisodeRecord curb = Episode(sim::TerminationReason::kCollision, 200, 1, "Curb");
  curb.route_completion = 0.5;
  CHECK(DrivingScore(curb) == Approx(0.5 * 0.65));
  // Leaving the route or stopping ends the episode: the completion pays for it.
  EpisodeRecord off = Episode(sim::TerminationReason::kOffCenterLine, 200, 1);
  off.route_completion = 0.3;
  CHECK(DrivingScore(off) == Approx(0.3));
  CHECK(DrivingScore(Episode(sim::TerminationReason::kTimeLimit, 250, 1)) == 1.0);
  // Over episodes: the mean with its t interval.
  EvalSummary summary = SummaryOf({vehicle, parked, curb, off});
  const EvalStatistics stats = StatisticsOf(summary);
  CHECK(stats.driving_score.estimate == Approx((0.24 + 0.26 + 0.325 + 0.3) / 4));
  CHECK(stats.route_completion.estimate == Approx((0.4 + 0.4 + 0.5 + 0.3) / 4));
  CHECK(stats.driving_score.low < stats.driving_score.estimate);
  CHECK(stats.driving_score.high > stats.driving_score.estimate);
}

TEST_CASE("Statistics count outcomes and metres per infraction, reproducibly", "[evaluation]") {
  const EvalSummary summary = SummaryOf({
      Episode(sim::TerminationReason::kTimeLimit, 100, 50),
      Episode(sim::TerminationReason::kTimeLimit, 100, 50),
      Episode(sim::TerminationReason::kCollision, 50, 20, "Curb"),
      Episode(sim::TerminationReason::kTooSlow, 10, 0),
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
      Episode(sim::TerminationReason::kTimeLimit, 120, 60),
      Episode(sim::TerminationReason::kTimeLimit, 80, 40),
  }));
  CHECK(clean.infractions == 0);
  CHECK(clean.metres_per_infraction.estimate == Approx(200.0));
  CHECK(clean.metres_per_infraction.low == Approx(200.0));
  CHECK(std::isinf(clean.metres_per_infraction.high));
}

TEST_CASE("An evaluation's table gives every outcome with its interval, for every policy",
          "[evaluation]") {
  // The traffic scenario on a short route, to keep it quick.
  EnvironmentSpec spec;
  REQUIRE(UseScenario("traffic", &spec).ok());
  spec.env.route_length_m = 60;
  spec.env.max_epoch_runtime_sec = 15;
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
      stats.outcome_rate[static_cast<int>(EpisodeOutcome::kCollisionVehicle)].estimate +
      stats.outcome_rate[static_cast<int>(EpisodeOutcome::kCollisionOther)].estimate;
  CHECK(collision_rate == Approx(collided / 8.0));
  CHECK(collided == random->collisions);
  // The scripted expert on the same seeds drives the short route.
  absl::StatusOr<EvalSummary> expert = (*evaluator)->Expert(8);
  REQUIRE(expert.ok());
  CHECK(expert->full_episodes >= 6);
  CHECK(StatisticsOf(*expert).driving_score.estimate > stats.driving_score.estimate);
  const std::string table = FormatComparison(*random, *random, &*expert);
  CHECK_THAT(table, Catch::Matchers::ContainsSubstring("scenario: traffic (") &&
                        Catch::Matchers::ContainsSubstring("95% CI over 8 episodes") &&
                        Catch::Matchers::ContainsSubstring("collision: vehicle") &&
                        Catch::Matchers::ContainsSubstring("scripted expert") &&
                        Catch::Matchers::ContainsSubstring("driving score") &&
                        Catch::Matchers::ContainsSubstring(
                            absl::StrCat("RESULT infractions=", stats.infractions, "\n")) &&
                        Catch::Matchers::ContainsSubstring("RESULT random_completed_ci_high=") &&
                        Catch::Matchers::ContainsSubstring("RESULT expert_driving_score_ci_low="));
}

}  // namespace
}  // namespace convoy::agent
