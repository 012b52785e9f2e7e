#include "agent/evaluation/eval_statistics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "boost/math/distributions/students_t.hpp"
#include "simulator_bridge/world/traffic.h"
#include "simulator_bridge/world/world.h"

namespace convoy::agent {
namespace {

constexpr double kZ95 = 1.959963984540054;  // The standard normal's 97.5th percentile.
constexpr int kBootstrapResamples = 2000;
constexpr uint64_t kBootstrapSeed = 20261204;

// Wilson's score interval of a rate `p` observed over `n` trials.
Interval Wilson(double p, double n) {
  const double z2 = kZ95 * kZ95;
  const double centre = (p + z2 / (2 * n)) / (1 + z2 / n);
  const double half = kZ95 / (1 + z2 / n) * std::sqrt(p * (1 - p) / n + z2 / (4 * n * n));
  return {p, std::max(0.0, centre - half), std::min(1.0, centre + half)};
}

}  // namespace

Interval WilsonInterval(int successes, int trials) {
  return Wilson(static_cast<double>(successes) / trials, trials);
}

Interval MeanInterval(const std::vector<double>& values) {
  if (values.empty()) return {};
  const double n = static_cast<double>(values.size());
  const double mean = std::accumulate(values.begin(), values.end(), 0.0) / n;
  if (values.size() < 2) return {mean, mean, mean};
  double squares = 0;
  for (double v : values) squares += (v - mean) * (v - mean);
  const double standard_error = std::sqrt(squares / (n - 1) / n);
  const double t = boost::math::quantile(boost::math::students_t(n - 1), 0.975);
  return {mean, mean - t * standard_error, mean + t * standard_error};
}

Interval BoundedMeanInterval(const std::vector<double>& values) {
  Interval interval = MeanInterval(values);
  if (values.size() < 2) return interval;
  const auto [lowest, highest] = std::minmax_element(values.begin(), values.end());
  if (*lowest == *highest) return Wilson(interval.estimate, static_cast<double>(values.size()));
  interval.low = std::clamp(interval.low, 0.0, 1.0);
  interval.high = std::clamp(interval.high, 0.0, 1.0);
  return interval;
}

namespace {
// Per EpisodeOutcome, in its order: the RESULT key and what a person reads.
struct OutcomeNames {
  const char* key;
  const char* label;
};
constexpr OutcomeNames kOutcomeNames[kEpisodeOutcomes] = {
    {"completed", "completed"},
    {"collision_curb", "collision: curb"},
    {"collision_parked_car", "collision: parked car"},
    {"collision_stalled_car", "collision: stalled car"},
    {"collision_vehicle", "collision: vehicle"},
    {"collision_other", "collision: other"},
    {"off_center_line", "off the centre line"},
    {"too_slow", "too slow (stuck)"},
    {"timed_out", "timed out"},
};
}  // namespace

const char* EpisodeOutcomeKey(EpisodeOutcome outcome) {
  return kOutcomeNames[static_cast<int>(outcome)].key;
}

const char* EpisodeOutcomeLabel(EpisodeOutcome outcome) {
  return kOutcomeNames[static_cast<int>(outcome)].label;
}

EpisodeOutcome OutcomeOf(const EpisodeRecord& record) {
  if (record.completed) return EpisodeOutcome::kCompleted;
  switch (record.reason) {
    case sim::TerminationReason::kCollision:
      if (record.collided_with == sim::kCurbObjectName) return EpisodeOutcome::kCollisionCurb;
      if (absl::StartsWith(record.collided_with, sim::kParkedCarNamePrefix)) {
        return EpisodeOutcome::kCollisionParkedCar;
      }
      if (absl::StartsWith(record.collided_with, sim::kStalledCarNamePrefix)) {
        return EpisodeOutcome::kCollisionStalledCar;
      }
      if (absl::StartsWith(record.collided_with, sim::kTrafficCarNamePrefix)) {
        return EpisodeOutcome::kCollisionVehicle;
      }
      return EpisodeOutcome::kCollisionOther;
    case sim::TerminationReason::kOffCenterLine:
      return EpisodeOutcome::kOffCenterLine;
    case sim::TerminationReason::kTooSlow:
      return EpisodeOutcome::kTooSlow;
    case sim::TerminationReason::kTimeLimit:
      return EpisodeOutcome::kTimedOut;
    case sim::TerminationReason::kCompleted:
    case sim::TerminationReason::kNone:
      break;
  }
  return EpisodeOutcome::kCompleted;
}

double InfractionPenalty(EpisodeOutcome outcome) {
  switch (outcome) {
    case EpisodeOutcome::kCollisionVehicle:
      return 0.60;
    case EpisodeOutcome::kCollisionCurb:
    case EpisodeOutcome::kCollisionParkedCar:
    case EpisodeOutcome::kCollisionStalledCar:
    case EpisodeOutcome::kCollisionOther:
      return 0.65;
    default:
      return 1.0;
  }
}

double DrivingScore(const EpisodeRecord& record) {
  return record.route_completion * InfractionPenalty(OutcomeOf(record));
}

EvalStatistics StatisticsOf(const EvalSummary& summary) {
  EvalStatistics stats;
  const std::vector<EpisodeRecord>& episodes = summary.episodes;
  stats.episodes = static_cast<int>(episodes.size());
  if (episodes.empty()) return stats;
  std::array<int, kEpisodeOutcomes> counts{};
  std::vector<double> returns, distances, completions, scores;
  std::vector<int> infraction_of;  // 1 where the episode ended on an infraction.
  for (const EpisodeRecord& record : episodes) {
    const EpisodeOutcome outcome = OutcomeOf(record);
    ++counts[static_cast<int>(outcome)];
    returns.push_back(record.total_return);
    distances.push_back(record.distance_m);
    completions.push_back(record.route_completion);
    scores.push_back(DrivingScore(record));
    infraction_of.push_back(outcome == EpisodeOutcome::kCompleted ? 0 : 1);
  }
  for (int o = 0; o < kEpisodeOutcomes; ++o) {
    stats.outcome_rate[o] = WilsonInterval(counts[o], stats.episodes);
  }
  stats.mean_return = MeanInterval(returns);
  stats.mean_distance_m = MeanInterval(distances);
  stats.route_completion = BoundedMeanInterval(completions);
  stats.driving_score = BoundedMeanInterval(scores);
  stats.infractions = stats.episodes - counts[static_cast<int>(EpisodeOutcome::kCompleted)];
  const double metres = std::accumulate(distances.begin(), distances.end(), 0.0);
  // None: the metres driven, a lower bound.
  stats.metres_per_infraction.estimate =
      stats.infractions == 0 ? metres : metres / stats.infractions;
  std::mt19937_64 rng(kBootstrapSeed);
  std::uniform_int_distribution<size_t> pick(0, episodes.size() - 1);
  std::vector<double> resampled;
  resampled.reserve(kBootstrapResamples);
  for (int r = 0; r < kBootstrapResamples; ++r) {
    double m = 0;
    int infractions = 0;
    for (size_t i = 0; i < episodes.size(); ++i) {
      const size_t e = pick(rng);
      m += distances[e];
      infractions += infraction_of[e];
    }
    resampled.push_back(infractions == 0 ? std::numeric_limits<double>::infinity()
                                         : m / infractions);
  }
  std::sort(resampled.begin(), resampled.end());
  auto percentile = [&](double q) {
    return resampled[static_cast<size_t>(q * (resampled.size() - 1) + 0.5)];
  };
  // With no infraction at all, the metres driven are only a lower bound.
  stats.metres_per_infraction.low =
      stats.infractions == 0 ? stats.metres_per_infraction.estimate : percentile(0.025);
  stats.metres_per_infraction.high = percentile(0.975);
  return stats;
}

std::string FormatStatistics(const EvalSummary& greedy, const EvalSummary& random,
                             const EvalSummary* expert) {
  struct Column {
    const char* title;
    const char* prefix;
    EvalStatistics stats;
  };
  std::vector<Column> columns = {{"greedy (learned)", "", StatisticsOf(greedy)},
                                 {"random", "random_", StatisticsOf(random)}};
  if (expert != nullptr) columns.push_back({"scripted expert", "expert_", StatisticsOf(*expert)});
  std::string out = absl::StrFormat(
      "\n%-28s", absl::StrCat("95% CI over ", columns[0].stats.episodes, " episodes"));
  for (const Column& c : columns) absl::StrAppendFormat(&out, " %26s", c.title);
  out += "\n";
  auto percent = [](const Interval& i) {
    return absl::StrFormat("%5.1f%% [%5.1f%%, %5.1f%%]", 100 * i.estimate, 100 * i.low,
                           100 * i.high);
  };
  auto value = [](const Interval& i) {
    if (std::isinf(i.high)) return absl::StrFormat("%.1f [%.1f, inf]", i.estimate, i.low);
    return absl::StrFormat("%.1f [%.1f, %.1f]", i.estimate, i.low, i.high);
  };
  auto fraction = [](const Interval& i) {
    return absl::StrFormat("%.3f [%.3f, %.3f]", i.estimate, i.low, i.high);
  };
  auto row = [&](absl::string_view label, auto cell) {
    absl::StrAppendFormat(&out, "%-28s", label);
    for (const Column& c : columns) absl::StrAppendFormat(&out, " %26s", cell(c.stats));
    out += "\n";
  };
  for (int o = 0; o < kEpisodeOutcomes; ++o) {
    row(EpisodeOutcomeLabel(static_cast<EpisodeOutcome>(o)),
        [&](const EvalStatistics& s) { return percent(s.outcome_rate[o]); });
  }
  row("route completion", [&](const EvalStatistics& s) { return fraction(s.route_completion); });
  row("driving score", [&](const EvalStatistics& s) { return fraction(s.driving_score); });
  row("mean return", [&](const EvalStatistics& s) { return value(s.mean_return); });
  row("mean distance (m)", [&](const EvalStatistics& s) { return value(s.mean_distance_m); });
  row("metres per infraction",
      [&](const EvalStatistics& s) { return value(s.metres_per_infraction); });
  absl::StrAppendFormat(&out,
                        "(rates: Wilson; means: Student's t; metres per infraction: all metres "
                        "over the episodes not completed, bootstrap; driving score: route "
                        "completion x CARLA's infraction penalty)\n\n");
  auto interval = [&](const char* prefix, const char* key, const Interval& i) {
    absl::StrAppendFormat(&out,
                          "RESULT %s%s=%.4f\nRESULT %s%s_ci_low=%.4f\nRESULT %s%s_ci_high=%.4f\n",
                          prefix, key, i.estimate, prefix, key, i.low, prefix, key, i.high);
  };
  for (const Column& c : columns) {
    const EvalStatistics& s = c.stats;
    const char* prefix = c.prefix;
    for (int o = 0; o < kEpisodeOutcomes; ++o) {
      const char* key = EpisodeOutcomeKey(static_cast<EpisodeOutcome>(o));
      const Interval& i = s.outcome_rate[o];
      absl::StrAppendFormat(&out,
                            "RESULT %s%s_rate=%.4f\nRESULT %s%s_ci_low=%.4f\n"
                            "RESULT %s%s_ci_high=%.4f\n",
                            prefix, key, i.estimate, prefix, key, i.low, prefix, key, i.high);
    }
    absl::StrAppendFormat(&out,
                          "RESULT %smean_return_ci_low=%.3f\nRESULT %smean_return_ci_high=%.3f\n",
                          prefix, s.mean_return.low, prefix, s.mean_return.high);
    absl::StrAppendFormat(
        &out, "RESULT %smean_distance_m_ci_low=%.2f\nRESULT %smean_distance_m_ci_high=%.2f\n",
        prefix, s.mean_distance_m.low, prefix, s.mean_distance_m.high);
    interval(prefix, "route_completion", s.route_completion);
    interval(prefix, "driving_score", s.driving_score);
    absl::StrAppendFormat(&out,
                          "RESULT %sinfractions=%d\nRESULT %smetres_per_infraction=%.2f\n"
                          "RESULT %smetres_per_infraction_ci_low=%.2f\n"
                          "RESULT %smetres_per_infraction_ci_high=%.2f\n",
                          prefix, s.infractions, prefix, s.metres_per_infraction.estimate, prefix,
                          s.metres_per_infraction.low, prefix, s.metres_per_infraction.high);
  }
  return out;
}

}  // namespace convoy::agent
