// EvalStatistics: how an evaluation's episodes ended, with 95% confidence intervals, as driving
// benchmarks report them (MetaDrive's rates of arrived / out of road / crashed / timed out over
// held-out seeds; CARLA's CoRL2017 benchmark's distance between infractions).
//
// Rates carry Wilson score intervals (sound at 0 and at n of n, where the normal approximation
// collapses to a point); means carry Student's t intervals, those of scores in [0, 1] kept within
// [0, 1] and, where every episode scored the same, Wilson's instead; metres per infraction, a ratio
// of two sums, carries a percentile bootstrap interval over the episodes with a fixed seed, so the
// same episodes always give the same interval.
#ifndef CONVOY_AGENT_EVALUATION_EVAL_STATISTICS_H_
#define CONVOY_AGENT_EVALUATION_EVAL_STATISTICS_H_

#include <array>
#include <string>
#include <vector>

#include "agent/evaluation/evaluation.h"

namespace convoy::agent {

// An estimate with its 95% confidence interval.
struct Interval {
  double estimate = 0;
  double low = 0;
  double high = 0;
};

// The Wilson score interval of `successes` in `trials` (trials > 0), at 95%.
Interval WilsonInterval(int successes, int trials);

// The mean of `values` with Student's t interval at 95%; with fewer than two values the interval
// is the point.
Interval MeanInterval(const std::vector<double>& values);

// The mean of `values`, each in [0, 1] (a route completion, a driving score), with Student's t
// interval cut to [0, 1]. Where every value is the same, t's interval is the point (100 perfect
// episodes would claim a true mean of exactly 1); there it is the Wilson interval of the mean as a
// rate over the values' count, which is sound for any variable in [0, 1] (its variance is at most
// m(1 - m)) and gives 100 of 100 the interval [0.963, 1].
Interval BoundedMeanInterval(const std::vector<double>& values);

// How an episode ended. A collision is told apart by what the car hit.
enum class EpisodeOutcome {
  kCompleted = 0,       // Did the task: drove its route, or (no route) stayed on to the time limit.
  kCollisionCurb,       // Hit a curb (left the road surface).
  kCollisionParkedCar,  // Hit a parked car.
  kCollisionStalledCar,  // Hit a car stalled on the road centre.
  kCollisionVehicle,     // Hit a moving car (traffic).
  kCollisionOther,       // Hit anything else.
  kOffCenterLine,        // Strayed too far from the road's centre line (off the route).
  kTooSlow,              // Stuck or stopped.
  kTimedOut,             // Reached the time limit before the end of its route.
};
inline constexpr int kEpisodeOutcomes = 9;
// "completed", "collision_curb", "collision_parked_car", "collision_stalled_car",
// "collision_vehicle", "collision_other",
// "off_center_line", "too_slow", "timed_out": RESULT keys.
const char* EpisodeOutcomeKey(EpisodeOutcome outcome);
// What a person reads: "completed", "collision: curb", ...
const char* EpisodeOutcomeLabel(EpisodeOutcome outcome);
EpisodeOutcome OutcomeOf(const EpisodeRecord& record);

// CARLA's leaderboard penalty for the infraction an episode ended on: a collision with a vehicle
// 0.60, with anything static (curb, parked or stalled car, other) 0.65; leaving the route, stopping
// and timing out end the episode without a penalty of their own (the route completion pays for
// them), as do completed episodes: 1.
double InfractionPenalty(EpisodeOutcome outcome);
// CARLA's driving score of one episode: route completion times the penalty of its infraction.
double DrivingScore(const EpisodeRecord& record);

struct EvalStatistics {
  int episodes = 0;
  std::array<Interval, kEpisodeOutcomes> outcome_rate;  // Indexed by EpisodeOutcome.
  Interval mean_return;
  Interval mean_distance_m;
  Interval route_completion;  // Mean over episodes, in [0, 1].
  Interval driving_score;     // Mean over episodes, in [0, 1].
  // Every episode that did not reach the time limit ended on an infraction (a collision, leaving
  // the centre line, or stopping): metres driven over all episodes per such episode. With none, the
  // estimate and the interval's low end are the metres driven (at least that far per infraction)
  // and its high end is infinite; the high end is infinite too when more than 2.5% of the
  // bootstrap's resamples hold no infraction.
  int infractions = 0;
  Interval metres_per_infraction;
};

EvalStatistics StatisticsOf(const EvalSummary& summary);

// The table of the policies' statistics (rows: measures; columns: greedy, random and, when given,
// the scripted expert) and their RESULT lines: <outcome>_rate, <outcome>_ci_low and
// <outcome>_ci_high per outcome; mean_return_ci_low/high and mean_distance_m_ci_low/high (the
// means are FormatComparison's); route_completion and driving_score with _ci_low/_ci_high;
// infractions, metres_per_infraction and its _ci_low/_ci_high. The random policy's keys start
// with random_, the expert's with expert_.
std::string FormatStatistics(const EvalSummary& greedy, const EvalSummary& random,
                             const EvalSummary* expert = nullptr);

}  // namespace convoy::agent

#endif  // CONVOY_AGENT_EVALUATION_EVAL_STATISTICS_H_
