// Evaluation: a policy driven over fixed-seed episodes, summarised as the cookbook would judge it.
#ifndef CONVOY_AGENT_EVALUATION_EVALUATION_H_
#define CONVOY_AGENT_EVALUATION_EVALUATION_H_

#include <array>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/environment/environment.h"
#include "agent/environment/preprocess.h"
#include "common/model/model_registry.h"
#include "simulator_bridge/world/road_map.h"

namespace convoy::agent {

class DqnLearner;

struct EpisodeRecord {
  uint64_t seed = 0;
  double total_return = 0;
  int steps = 0;
  double distance_m = 0;
  bool collided = false;
  std::string collided_with;  // What the car hit (the simulator's object name), when it collided.
  sim::TerminationReason reason = sim::TerminationReason::kNone;
  bool completed = false;                     // It did what the task asked (IsSuccess).
  double route_completion = 0;                // How much of it, in [0, 1] (TaskCompletion).
  std::vector<std::pair<float, float>> path;  // (x, y) metres, one point per step.
  sim::RoadPlace end_place = sim::RoadPlace::kStraight;  // Where on the map the episode ended.
};

struct EvalSummary {
  std::string scenario;  // The scenario the episodes ran (EnvironmentSpec::scenario), when known.
  std::vector<EpisodeRecord> episodes;
  double mean_return = 0;
  // The mean of CARLA's driving score over the episodes (eval_statistics.h, DrivingScore): what
  // the evaluation reports and what a run's choice of policy ranks first.
  double mean_driving_score = 0;
  double mean_distance_m = 0;
  int collisions = 0;
  int full_episodes =
      0;  // Completed: the route driven, or (no route) on the road to the time limit.
  // The other episodes by where they ended (RoadMap::PlaceOf): on a straight, in a corner, in an
  // intersection. Indexed by RoadPlace.
  std::array<int, sim::kRoadPlaces> ended_at{};
};

// Maps a stacked observation (the model's input, uint8 CHW) to an action.
using Policy = std::function<int(const uint8_t* observation)>;

// One step of an evaluated episode, as an observer of Evaluate sees it: the action taken, what it
// led to, and the environment's observation after it (DrivingEnv's layout and shape).
struct EvalStep {
  uint64_t seed = 0;
  int step = 0;  // 1 for an episode's first action.
  int action = 0;
  const sim::StepResult* result = nullptr;
  const uint8_t* frame = nullptr;
};
// Called after every step; an error ends the evaluation with it.
using StepObserver = std::function<absl::Status(const EvalStep&)>;

// The seeds every evaluation uses, so greedy and random policies meet the same starts.
std::vector<uint64_t> EvaluationSeeds(int episodes);

// Seeds for choosing between policies during a run, disjoint from EvaluationSeeds (and from the
// agents' training episodes), so that the final evaluation judges a choice on episodes it was not
// made on.
std::vector<uint64_t> ValidationSeeds(int episodes);

// The summary of these episodes: their means, counts and end places (EpisodeRecord::end_place).
EvalSummary SummaryOf(std::vector<EpisodeRecord> episodes);

// Whether `a` drives better than `b`: a higher mean driving score, then (on a tie) more full
// episodes, then a higher mean return.
bool BetterPolicy(const EvalSummary& a, const EvalSummary& b);

// Runs one episode per seed. `frame_stack` frames of `preprocess`'s output make one observation.
absl::StatusOr<EvalSummary> Evaluate(sim::DrivingEnv& env, const Preprocess& preprocess,
                                     int frame_stack, const Policy& policy,
                                     const std::vector<uint64_t>& seeds,
                                     const StepObserver& observer = nullptr);

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

  // The greedy policy of `weights` on the first `episodes` EvaluationSeeds. INVALID_ARGUMENT for
  // weights of another size.
  absl::StatusOr<EvalSummary> Greedy(const std::vector<float>& weights, int episodes);
  // The same on the given seeds. An observer sees every step; during its call q_values() holds the
  // Q-values the step's action was chosen by.
  absl::StatusOr<EvalSummary> Greedy(const std::vector<float>& weights,
                                     const std::vector<uint64_t>& seeds,
                                     const StepObserver& observer = nullptr);
  const std::vector<float>& q_values() const { return q_values_; }
  // A uniformly random policy (fixed seed) on the same seeds: the baseline.
  absl::StatusOr<EvalSummary> Random(int episodes);
  // The same on the given seeds.
  absl::StatusOr<EvalSummary> Random(const std::vector<uint64_t>& seeds);
  // The scripted expert (simulator_bridge/task/expert_driver.h) on the same seeds: the other baseline.
  // `sight_m`: how near a stalled car must be for the expert to know it (ExpertDriver::Act).
  absl::StatusOr<EvalSummary> Expert(int episodes,
                                     double sight_m = std::numeric_limits<double>::infinity());
  // The same on the given seeds.
  absl::StatusOr<EvalSummary> Expert(const std::vector<uint64_t>& seeds,
                                     double sight_m = std::numeric_limits<double>::infinity());

  sim::DrivingEnv& env() { return *environment_->env; }

 private:
  GreedyEvaluator(std::string scenario, std::unique_ptr<Environment> environment,
                  std::unique_ptr<DqnLearner> learner, Preprocess preprocess, int frame_stack);

  // Evaluate's summary, named with the scenario.
  absl::StatusOr<EvalSummary> Run(const Policy& policy, const std::vector<uint64_t>& seeds,
                                  const StepObserver& observer = nullptr);

  std::string scenario_;
  std::unique_ptr<Environment> environment_;
  std::unique_ptr<DqnLearner> learner_;
  Preprocess preprocess_;
  int frame_stack_;
  std::vector<float> q_values_;
};

// The best policy of a run: Consider() drives the greedy policy of a weight version over `episodes`
// ValidationSeeds and keeps the weights (in memory, and as `path`, a weights.pt, when given) if
// they beat every version considered before. DQN's policy swings while it learns; the kept one is
// what a run hands over besides its last weights.
//
// Ten validation episodes tell a policy that drives 9 starts in 10 from one that drives 6 only
// roughly, and the best of a run's validations is the one most flattered by them. So BestPolicy
// also keeps the runners-up (the kCandidates best versions) and the latest version considered, and
// Settle() — run when the agents have stopped and no longer need the cores — drives each of them
// over more validation seeds and chooses again on those alone: on all of each one's episodes, the
// versions kept for their first ones would still be favoured by them. Not thread-safe.
class BestPolicy {
 public:
  // Errors: GreedyEvaluator::Create's.
  static absl::StatusOr<std::unique_ptr<BestPolicy>> Create(const std::string& model,
                                                            const EnvironmentSpec& spec,
                                                            int episodes, std::string path);

  // Returns whether `weights` (server version `version`) became the best. Errors: INVALID_ARGUMENT
  // for weights of another size; the weights file's write errors (the best is still updated).
  absl::StatusOr<bool> Consider(uint64_t version, const std::vector<float>& weights);

  // Validates the server's averaged network (NETWORK_AVERAGE, folded as of `version`) on the same
  // seeds as Consider. It becomes the best when it beats the best so far, and is one of Settle's
  // candidates either way. A later call replaces an earlier one. Errors as Consider's.
  absl::StatusOr<bool> ConsiderAverage(uint64_t version, const std::vector<float>& weights);

  // Drives every kept candidate (the kCandidates best so far, the latest considered and the
  // averaged network) over the next `extra_episodes` ValidationSeeds (after the `episodes`
  // Consider uses) and makes the best of them on those episodes alone the best. Returns whether
  // the best changed; every candidate's summary (summary(), best_validated()) then covers the
  // extra_episodes only. A no-op (false) with fewer than two candidates or no extra episodes.
  // Errors: the evaluation's, or the weights file's (the best is still updated).
  absl::StatusOr<bool> Settle(int extra_episodes);
  static constexpr int kCandidates = 3;

  // The random policy (GreedyEvaluator::Random) on the validation seeds Consider drives: the line a
  // run's validations are read against. Errors: the evaluation's.
  absl::StatusOr<EvalSummary> RandomBaseline();
  // The scripted expert on the same seeds: the other line.
  absl::StatusOr<EvalSummary> ExpertBaseline();

  bool has_best() const { return has_best_; }
  uint64_t version() const { return version_; }
  // Whether the best is the averaged network (as of version()).
  bool averaged() const { return averaged_; }
  const EvalSummary& summary() const { return summary_; }  // On the validation seeds.
  const EvalSummary& last() const { return last_; }        // Of the latest Consider().
  const std::vector<float>& weights() const { return weights_; }
  int considered() const { return considered_; }
  // What Settle() would compare: the best first, then the runners-up, the latest, the averaged
  // network ("v12", "the average as of v40").
  std::vector<std::string> candidate_names() const;
  // "v12", or "the average as of v40".
  static std::string NameOf(uint64_t version, bool averaged);

  // The best of the validated versions (the averaged network aside) on all their validation
  // episodes, whether or not it is the best: what a hand-over that chose the last weights or the
  // averaged network is compared with. Null before the first Consider.
  struct Validated {
    uint64_t version = 0;
    const std::vector<float>* weights = nullptr;
    const EvalSummary* summary = nullptr;
  };
  std::optional<Validated> best_validated() const;

 private:
  struct Candidate {
    uint64_t version = 0;
    EvalSummary summary;
    std::vector<float> weights;
    bool averaged = false;
  };
  absl::Status Keep(const Candidate& chosen);
  BestPolicy(std::unique_ptr<GreedyEvaluator> evaluator, std::vector<uint64_t> seeds,
             std::string path, std::vector<ParameterSlot> layout);

  std::unique_ptr<GreedyEvaluator> evaluator_;
  std::vector<uint64_t> seeds_;
  std::string path_;
  std::vector<ParameterSlot> layout_;
  bool has_best_ = false;
  uint64_t version_ = 0;
  bool averaged_ = false;
  EvalSummary summary_;
  EvalSummary last_;
  std::vector<float> weights_;
  int considered_ = 0;
  std::vector<Candidate> leaders_;   // The kCandidates best, best first.
  std::optional<Candidate> latest_;  // The latest considered, when it is not among the leaders.
  std::optional<Candidate> average_;  // The averaged network, when considered.
};

// The greedy policy of `weights` (model `model`) and a random policy, and with `with_expert` the
// scripted expert, on the same `episodes` seeds of a fresh environment built from `spec`. Errors
// as GreedyEvaluator's.
struct Comparison {
  EvalSummary greedy;
  EvalSummary random;
  EvalSummary expert;
};
absl::StatusOr<Comparison> CompareWithRandom(const std::string& model,
                                             const std::vector<float>& weights,
                                             const EnvironmentSpec& spec, int episodes,
                                             bool with_expert = true);

// The table convoy_train and convoy_eval print: the scenario, greedy beside random, then RESULT
// lines, then FormatStatistics' table of outcomes and means with their confidence intervals (with
// the scripted expert's column when given).
std::string FormatComparison(const EvalSummary& greedy, const EvalSummary& random,
                             const EvalSummary* expert = nullptr);

}  // namespace convoy::agent

#endif  // CONVOY_AGENT_EVALUATION_EVALUATION_H_
