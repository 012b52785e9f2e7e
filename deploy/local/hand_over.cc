#include "deploy/local/hand_over.h"

#include <glog/logging.h>

#include <cstdio>
#include <utility>

#include "absl/strings/str_join.h"
#include "common/support/status_macros.h"

namespace convoy::deploy {
namespace {

// The averaged network as one more validated candidate. A failure is only logged: the choice then
// stands on the versions validated before.
void ValidateAverage(agent::BestPolicy& best, const RunEnd& end, const HandOverOptions& options) {
  absl::StatusOr<bool> better = best.ConsiderAverage(*end.average_version, end.averaged);
  if (!better.ok()) {
    LOG(WARNING) << "validation of the averaged network failed: " << better.status();
    return;
  }
  if (options.log_prefix.empty()) return;
  std::fprintf(
      stderr, "%svalidation of %s: driving score %.3f, %d/%zu full, return %.1f%s\n",
      options.log_prefix.c_str(), agent::BestPolicy::NameOf(*end.average_version, true).c_str(),
      best.last().mean_driving_score, best.last().full_episodes, best.last().episodes.size(),
      best.last().mean_return, *better ? ", the best yet" : "");
}

// The candidates on `options.settle_episodes` more validation seeds each. A failure is only
// logged, as ValidateAverage's.
void Settle(agent::BestPolicy& best, const HandOverOptions& options) {
  const std::vector<std::string> names = best.candidate_names();
  const std::string before = agent::BestPolicy::NameOf(best.version(), best.averaged());
  if (absl::StatusOr<bool> changed = best.Settle(options.settle_episodes); !changed.ok()) {
    LOG(WARNING) << "the final validation failed: " << changed.status();
    return;
  }
  if (names.size() <= 1 || options.log_prefix.empty()) return;
  const std::string chosen = agent::BestPolicy::NameOf(best.version(), best.averaged());
  std::fprintf(stderr,
               "%sfinal validation of %s on %d more seeds: %s, driving score %.3f, %d/%zu full, "
               "return %.1f%s\n",
               options.log_prefix.c_str(), absl::StrJoin(names, ", ").c_str(),
               options.settle_episodes, chosen.c_str(), best.summary().mean_driving_score,
               best.summary().full_episodes, best.summary().episodes.size(),
               best.summary().mean_return, chosen != before ? " (chosen anew)" : "");
}

}  // namespace

HandOverChoice ChooseHandOver(const std::optional<ValidatedBest>& best, uint64_t last_version) {
  HandOverChoice choice;
  choice.version = last_version;
  if (!best.has_value()) return choice;
  if (best->averaged) {
    choice.candidate = HandOverCandidate::kAverage;
  } else if (best->version != last_version) {
    choice.candidate = HandOverCandidate::kValidated;
  } else {
    return choice;
  }
  choice.version = best->version;
  return choice;
}

absl::StatusOr<HandOverResult> HandOver(agent::BestPolicy* best, RunEnd end,
                                        const HandOverOptions& options,
                                        const EvaluatePolicy& evaluate) {
  std::optional<ValidatedBest> validated;
  if (best != nullptr) {
    if (options.average_competes && end.average_version.has_value()) {
      ValidateAverage(*best, end, options);
    }
    if (options.settle_episodes > 0) Settle(*best, options);
    if (best->has_best()) validated = ValidatedBest{best->version(), best->averaged()};
  }
  HandOverResult result;
  result.choice = ChooseHandOver(validated, end.last_version);
  if (result.choice.chose_earlier()) {
    CONVOY_ASSIGN_OR_RETURN(result.last, evaluate(HandOverCandidate::kLast, end.last_weights));
    result.weights = best->weights();
  } else {
    result.weights = std::move(end.last_weights);
  }
  if (end.average_version.has_value() && !result.choice.averaged()) {
    CONVOY_ASSIGN_OR_RETURN(result.average, evaluate(HandOverCandidate::kAverage, end.averaged));
  }
  // The best validated version: its weights are evaluated unless they are the choice's or the
  // last ones.
  agent::BestPolicy::Validated top{};
  bool has_validated = false;
  if (best != nullptr) {
    if (const std::optional<agent::BestPolicy::Validated> v = best->best_validated();
        v.has_value()) {
      top = *v;
      has_validated = true;
    }
  }
  const bool validated_chosen = has_validated &&
                                result.choice.candidate == HandOverCandidate::kValidated &&
                                top.version == result.choice.version;
  const bool validated_is_last = has_validated && top.version == end.last_version;
  if (has_validated) result.validated_version = top.version;
  if (has_validated && !validated_chosen && !validated_is_last) {
    CONVOY_ASSIGN_OR_RETURN(result.validated,
                            evaluate(HandOverCandidate::kValidated, *top.weights));
  }
  CONVOY_ASSIGN_OR_RETURN(result.handed_over, evaluate(result.choice.candidate, result.weights));
  if (!result.choice.chose_earlier()) result.last = result.handed_over;
  if (result.choice.averaged()) result.average = result.handed_over;
  if (validated_chosen) result.validated = result.handed_over;
  if (validated_is_last) result.validated = result.last;
  return result;
}

}  // namespace convoy::deploy
