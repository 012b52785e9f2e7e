// Evaluation: a policy driven over fixed-seed episodes, summarised as the cookbook would judge it.
#ifndef CONVOY_AGENT_EVALUATION_H_
#define CONVOY_AGENT_EVALUATION_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/environment.h"
#include "agent/preprocess.h"

namespace convoy {

class DqnLearner;

struct EpisodeRecord {
  uint64_t seed = 0;
  double total_return = 0;
  int steps = 0;
  double distance_m = 0;
  bool collided = false;
  TerminationReason reason = TerminationReason::kNone;
  std::vector<std::pair<float, float>> path;  // (x, y) metres, one point per step.
};

struct EvalSummary {
  std::vector<EpisodeRecord> episodes;
  double mean_return = 0;
  double mean_distance_m = 0;
  int collisions = 0;
  int full_episodes = 0;  // Ended by the time limit: the car stayed on the road the whole episode.
};

// Maps a stacked observation (the model's input, uint8 CHW) to an action.
using Policy = std::function<int(const uint8_t* observation)>;

// The seeds every evaluation uses, so greedy and random policies meet the same starts.
std::vector<uint64_t> EvaluationSeeds(int episodes);

// Runs one episode per seed. `frame_stack` frames of `preprocess`'s output make one observation.
absl::StatusOr<EvalSummary> Evaluate(DrivingEnv& env, const Preprocess& preprocess, int frame_stack,
                                     const Policy& policy, const std::vector<uint64_t>& seeds);

// A uniformly random policy, reproducible for `seed`.
Policy RandomPolicy(int num_actions, uint64_t seed);

// One environment and one Q-network, reused for every evaluation (of a run, or of a checkpoint).
// Not thread-safe.
class GreedyEvaluator {
 public:
  // Errors: the environment's, or INVALID_ARGUMENT for an unknown model.
  static absl::StatusOr<std::unique_ptr<GreedyEvaluator>> Create(const std::string& model,
                                                                 const EnvironmentSpec& spec);
  ~GreedyEvaluator();

  // The greedy policy of `weights` on the first `episodes` EvaluationSeeds. INVALID_ARGUMENT for weights
  // of another size.
  absl::StatusOr<EvalSummary> Greedy(const std::vector<float>& weights, int episodes);
  // A uniformly random policy (fixed seed) on the same seeds: the baseline.
  absl::StatusOr<EvalSummary> Random(int episodes);

  DrivingEnv& env() { return *environment_->env; }

 private:
  GreedyEvaluator(std::unique_ptr<Environment> environment, std::unique_ptr<DqnLearner> learner,
                  Preprocess preprocess, int frame_stack);

  std::unique_ptr<Environment> environment_;
  std::unique_ptr<DqnLearner> learner_;
  Preprocess preprocess_;
  int frame_stack_;
};

// The greedy policy of `weights` (model `model`) and a random policy, on the same `episodes` seeds of a fresh
// environment built from `spec`. Errors as GreedyEvaluator's.
struct Comparison {
  EvalSummary greedy;
  EvalSummary random;
};
absl::StatusOr<Comparison> CompareWithRandom(const std::string& model, const std::vector<float>& weights,
                                             const EnvironmentSpec& spec, int episodes);

// The table convoy_train and convoy_eval print: greedy beside random, then RESULT lines.
std::string FormatComparison(const EvalSummary& greedy, const EvalSummary& random);

}  // namespace convoy

#endif  // CONVOY_AGENT_EVALUATION_H_
