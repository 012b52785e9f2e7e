#include "agent/eval_statistics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "boost/math/distributions/students_t.hpp"
#include "simulator_bridge/world.h"

namespace convoy {
namespace {

constexpr double kZ95 = 1.959963984540054;  // The standard normal's 97.5th percentile.
constexpr int kBootstrapResamples = 2000;
constexpr uint64_t kBootstrapSeed = 20261204;

}  // namespace

Interval WilsonInterval(int successes, int trials) {
  const double n = trials;
  const double p = successes / n;
  const double z2 = kZ95 * kZ95;
  const double centre = (p + z2 / (2 * n)) / (1 + z2 / n);
  const double half = kZ95 / (1 + z2 / n) * std::sqrt(p * (1 - p) / n + z2 / (4 * n * n));
  return {p, std::max(0.0, centre - half), std::min(1.0, centre + half)};
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

namespace {
// Per EpisodeOutcome, in its order: the RESULT key and what a person reads.
struct OutcomeNames {
  const char* key;
  const char* label;
};
constexpr OutcomeNames kOutcomeNames[kEpisodeOutcomes] = {
    {"completed", "completed (time limit)"},           {"collision_curb", "collision: curb"},
    {"collision_parked_car", "collision: parked car"}, {"collision_other", "collision: other"},
    {"off_center_line", "off the centre line"},        {"too_slow", "too slow (stuck)"},
};
}  // namespace

const char* EpisodeOutcomeKey(EpisodeOutcome outcome) {
  return kOutcomeNames[static_cast<int>(outcome)].key;
}

const char* EpisodeOutcomeLabel(EpisodeOutcome outcome) {
  return kOutcomeNames[static_cast<int>(outcome)].label;
}

EpisodeOutcome OutcomeOf(const EpisodeRecord& record) {
  switch (record.reason) {
    case TerminationReason::kCollision:
      if (record.collided_with == kCurbObjectName) return EpisodeOutcome::kCollisionCurb;
      if (absl::StartsWith(record.collided_with, kParkedCarNamePrefix)) {
        return EpisodeOutcome::kCollisionParkedCar;
      }
      return EpisodeOutcome::kCollisionOther;
    case TerminationReason::kOffCenterLine:
      return EpisodeOutcome::kOffCenterLine;
    case TerminationReason::kTooSlow:
      return EpisodeOutcome::kTooSlow;
    case TerminationReason::kTimeLimit:
    case TerminationReason::kNone:
      break;
  }
  return EpisodeOutcome::kCompleted;
}

EvalStatistics StatisticsOf(const EvalSummary& summary) {
  EvalStatistics stats;
  const std::vector<EpisodeRecord>& episodes = summary.episodes;
  stats.episodes = static_cast<int>(episodes.size());
  if (episodes.empty()) return stats;
  std::array<int, kEpisodeOutcomes> counts{};
  std::vector<double> returns, distances;
  std::vector<int> infraction_of;  // 1 where the episode ended on an infraction.
  for (const EpisodeRecord& record : episodes) {
    const EpisodeOutcome outcome = OutcomeOf(record);
    ++counts[static_cast<int>(outcome)];
    returns.push_back(record.total_return);
    distances.push_back(record.distance_m);
    infraction_of.push_back(outcome == EpisodeOutcome::kCompleted ? 0 : 1);
  }
  for (int o = 0; o < kEpisodeOutcomes; ++o) {
    stats.outcome_rate[o] = WilsonInterval(counts[o], stats.episodes);
  }
  stats.mean_return = MeanInterval(returns);
  stats.mean_distance_m = MeanInterval(distances);
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

std::string FormatStatistics(const EvalSummary& greedy, const EvalSummary& random) {
  const EvalStatistics g = StatisticsOf(greedy);
  const EvalStatistics r = StatisticsOf(random);
  std::string out =
      absl::StrFormat("\n%-28s %26s %26s\n", absl::StrCat("95% CI over ", g.episodes, " episodes"),
                      "greedy (learned)", "random");
  auto percent = [](const Interval& i) {
    return absl::StrFormat("%5.1f%% [%5.1f%%, %5.1f%%]", 100 * i.estimate, 100 * i.low,
                           100 * i.high);
  };
  auto value = [](const Interval& i) {
    if (std::isinf(i.high)) return absl::StrFormat("%.1f [%.1f, inf]", i.estimate, i.low);
    return absl::StrFormat("%.1f [%.1f, %.1f]", i.estimate, i.low, i.high);
  };
  auto row = [&](absl::string_view label, const std::string& greedy_cell,
                 const std::string& random_cell) {
    absl::StrAppendFormat(&out, "%-28s %26s %26s\n", label, greedy_cell, random_cell);
  };
  for (int o = 0; o < kEpisodeOutcomes; ++o) {
    row(EpisodeOutcomeLabel(static_cast<EpisodeOutcome>(o)), percent(g.outcome_rate[o]),
        percent(r.outcome_rate[o]));
  }
  row("mean return", value(g.mean_return), value(r.mean_return));
  row("mean distance (m)", value(g.mean_distance_m), value(r.mean_distance_m));
  row("metres per infraction", value(g.metres_per_infraction), value(r.metres_per_infraction));
  absl::StrAppendFormat(&out,
                        "(rates: Wilson; means: Student's t; metres per infraction: all metres "
                        "over the episodes not completed, bootstrap)\n\n");
  auto results = [&](const char* prefix, const EvalStatistics& s) {
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
    absl::StrAppendFormat(&out,
                          "RESULT %sinfractions=%d\nRESULT %smetres_per_infraction=%.2f\n"
                          "RESULT %smetres_per_infraction_ci_low=%.2f\n"
                          "RESULT %smetres_per_infraction_ci_high=%.2f\n",
                          prefix, s.infractions, prefix, s.metres_per_infraction.estimate, prefix,
                          s.metres_per_infraction.low, prefix, s.metres_per_infraction.high);
  };
  results("", g);
  results("random_", r);
  return out;
}

}  // namespace convoy
