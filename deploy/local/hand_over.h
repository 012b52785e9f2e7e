// The hand-over at the end of a training run: which policy the run hands over, and how it and the
// other candidates drive on the evaluation seeds. convoy_train and convoy_bench_learn both end a
// run with it; where their rules differ, HandOverOptions says so.
//
// The steps, in order: the caller has validated the last weights (BestPolicy::Consider, which also
// draws its learning curve); HandOver then validates the averaged network when it competes, settles
// the candidates on more validation seeds, chooses (ChooseHandOver), and evaluates the last
// weights, the averaged network and the chosen policy on the evaluation seeds, none of which a
// choice was made on.
#ifndef CONVOY_DEPLOY_LOCAL_HAND_OVER_H_
#define CONVOY_DEPLOY_LOCAL_HAND_OVER_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/evaluation/evaluation.h"

namespace convoy::deploy {

// What a run's end has to hand over: the server's last weights and, when the run kept one, its
// averaged network.
struct RunEnd {
  uint64_t last_version = 0;
  std::vector<float> last_weights;
  std::optional<uint64_t> average_version;  // Set when the averaged network was pulled.
  std::vector<float> averaged;
};

struct HandOverOptions {
  // Whether the averaged network competes with the validated versions (convoy_train), or is only
  // evaluated beside the policy handed over (convoy_bench_learn).
  bool average_competes = true;
  // BestPolicy::Settle's extra validation episodes per candidate (0: the validations during the run
  // decide).
  int settle_episodes = 0;
  // Prefixes the lines that report the validation of the average and the settling on stderr, e.g.
  // "convoy_train: " (empty: those steps print nothing).
  std::string log_prefix;
};

// The policies a run can hand over.
enum class HandOverCandidate {
  kLast,       // The server's weights when the agents stopped.
  kValidated,  // An earlier version that validated better than the last.
  kAverage,    // The server's averaged network.
};

struct HandOverChoice {
  HandOverCandidate candidate = HandOverCandidate::kLast;
  uint64_t version = 0;  // The server version of the weights (the average: folded as of it).
  bool averaged() const { return candidate == HandOverCandidate::kAverage; }
  bool chose_earlier() const { return candidate != HandOverCandidate::kLast; }
};

// The best of a run's validations, as BestPolicy holds it after the last weights were considered.
struct ValidatedBest {
  uint64_t version = 0;
  bool averaged = false;
};

// The choice: the validated best when there is one and it is not the last weights themselves,
// else the last weights (also when validation was off: `best` empty).
HandOverChoice ChooseHandOver(const std::optional<ValidatedBest>& best, uint64_t last_version);

// Drives `weights`, the candidate `which`, over the run's evaluation seeds.
using EvaluatePolicy = std::function<absl::StatusOr<agent::EvalSummary>(
    HandOverCandidate which, const std::vector<float>& weights)>;

struct HandOverResult {
  HandOverChoice choice;
  std::vector<float> weights;  // The policy handed over.
  agent::EvalSummary handed_over;  // It, on the evaluation seeds.
  agent::EvalSummary last;         // The last weights there (the same as handed_over when chosen).
  // The averaged network there, when the run has one (the same as handed_over when chosen).
  std::optional<agent::EvalSummary> average;
  // The best validated version there (BestPolicy::best_validated), with its version: the same as
  // handed_over when chosen, as last when it is the last weights; none without validations.
  std::optional<uint64_t> validated_version;
  std::optional<agent::EvalSummary> validated;
};

// Validates the average (when it competes) and settles `best`, whose failures are logged and leave
// the choice to the validations before them; then chooses and evaluates every candidate, so that
// the choice can be judged against those it was chosen among: the last weights when they are not
// the choice, the averaged network when it is not the choice, the best validated version when it is
// neither the choice nor the last weights, then the choice, in that order. `best` is null when the
// run validated nothing. Errors: `evaluate`'s.
absl::StatusOr<HandOverResult> HandOver(agent::BestPolicy* best, RunEnd end,
                                        const HandOverOptions& options,
                                        const EvaluatePolicy& evaluate);

}  // namespace convoy::deploy

#endif  // CONVOY_DEPLOY_LOCAL_HAND_OVER_H_
