// DqnLearner: the agent's Q-network, its target network, and one DQN update at a time.
//
// Double DQN targets (the online network picks the next action, the target network values it), Huber loss
// (for a quantile network, QR-DQN's quantile Huber loss) weighted by importance-sampling weights, n-step
// returns (the replay memory supplies returns and discounts), gradient-norm clipping. Gradients accumulate over minibatches until they are taken as their mean (to push to
// the parameter server) or applied by the local optimizer (training alone, or pushing weight deltas).
// On CUDA, --amp runs the forward passes under autocast with dynamic loss scaling.
//
// Not thread-safe: the agent's learning thread owns it.
#ifndef CONVOY_AGENT_LEARNING_LEARNER_H_
#define CONVOY_AGENT_LEARNING_LEARNER_H_

#include <torch/torch.h>

#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model/model_registry.h"
#include "common/model/q_network.h"
#include "common/settings/run_defaults.h"

namespace convoy::agent {

struct LearnerOptions {
  std::string model = run_defaults::kLocalModel;
  int num_actions = kDefaultNumActions;
  uint64_t seed = 1;
  torch::Device device = torch::kCPU;
  bool double_dqn = run_defaults::kDoubleDqn;
  double huber_delta = 1.0;
  // Clips the mean gradient of each update; 0 disables.
  double max_grad_norm = run_defaults::kLearnerMaxGradNorm;
  // The local Adam (training alone, pushing deltas, riding out a server outage).
  double learning_rate = run_defaults::kLearningRate;
  bool amp = false;             // CUDA only.
  // Mirror augmentation: empty for none, else every action's mirror image (the action with its
  // steering negated; an involution over [0, num_actions)). Accumulate then mirrors every other
  // sample of each minibatch: its observation and next observation flipped left to right, its
  // action replaced by the mirror image. The road, its markings and the reward are the same seen in
  // a mirror, so the mirrored transition is as real as the one driven; a turn learned one way is
  // learned the other way too.
  std::vector<int64_t> mirror_actions;
  // DrQ's random shift (Kostrikov et al. 2020): 0 for none, else Accumulate shifts each sample's
  // observation and, on its own, its next observation by up to this many pixels in each direction,
  // repeating the edge, before the forward passes (after mirroring).
  int random_shift = 0;
};

struct TrainStats {
  double loss = 0;
  double mean_q = 0;
  std::vector<float> td_errors;  // |target - Q|, for prioritized replay.
};

// DrQ's pad-and-crop: each image of `images` [N, C, H, W] (any dtype, any device) moved by its own
// (dy, dx), each drawn uniformly from [-pad, pad] by `generator`, the edge repeated where it moved
// away.
torch::Tensor RandomShift(const torch::Tensor& images, int pad, torch::Generator& generator);

class DqnLearner {
 public:
  // Errors: INVALID_ARGUMENT for an unknown model; FAILED_PRECONDITION for --amp without CUDA.
  static absl::StatusOr<std::unique_ptr<DqnLearner>> Create(const LearnerOptions& options);

  // The greedy action for one observation (uint8 CHW, the model's input shape).
  int GreedyAction(const uint8_t* observation);
  // The online network's Q-value of every action for one observation, into `q` (num_actions of
  // them); returns the greedy action.
  int QValues(const uint8_t* observation, std::vector<float>* q);

  // One minibatch: observations/next_observations uint8 [N, C, H, W]; actions int64 [N]; returns, discounts,
  // weights float [N], all on the learner's device. Adds this minibatch's gradient to the accumulator.
  TrainStats Accumulate(const torch::Tensor& observations, const torch::Tensor& next_observations,
                        const torch::Tensor& actions, const torch::Tensor& returns,
                        const torch::Tensor& discounts, const torch::Tensor& weights);
  int accumulated() const { return accumulated_; }

  // The mean of the accumulated gradients, clipped, flattened in layout order into `out`; clears the
  // accumulator. Returns false (and clears) when AMP found an overflow and the update must be skipped.
  bool TakeMeanGradient(std::vector<float>* out);

  // Applies the mean accumulated gradient with the local Adam; clears the accumulator. With
  // `mean_gradient`, also copies the gradient it applied there (as TakeMeanGradient would give it).
  // Returns false when AMP found an overflow and nothing was applied.
  bool StepLocal(std::vector<float>* mean_gradient = nullptr);
  // The local Adam's rate from now on: `scale` times LearnerOptions::learning_rate (the run's
  // schedule, common/settings/exploration.h's LearningRateScale).
  void SetLearningRateScale(double scale);

  void SetWeights(const std::vector<float>& flat);
  void SetTargetWeights(const std::vector<float>& flat);
  void CopyOnlineToTarget();
  // Moves the target network `tau` of the way toward the online one (Polyak averaging, on the
  // learner's device; tau 1 is CopyOnlineToTarget).
  void MoveTargetTowardOnline(double tau);
  void GetWeights(std::vector<float>* flat);
  void GetTargetWeights(std::vector<float>* flat);

  // Everything an update depends on, as bytes (LibTorch's archive): the online and target
  // networks, the local Adam's moments and step counts, and AMP's loss scale. LoadState puts it
  // back into a learner of the same model, on whatever device this one is; an agent that resumes
  // goes on learning where it stopped. Errors: DATA_LOSS when `bytes` is not such an archive;
  // FAILED_PRECONDITION naming both sizes when it holds another model's parameters; either leaves
  // the learner as it was. DATA_LOSS too when only the optimizer's part does not load: the networks
  // are then loaded and the Adam starts afresh.
  std::string SaveState();
  absl::Status LoadState(const std::string& bytes);

  const ModelInfo& model() const { return model_; }
  torch::Device device() const { return options_.device; }

 private:
  DqnLearner(const LearnerOptions& options, ModelInfo model, QNetwork online, QNetwork target);
  // Mean gradient over the accumulated minibatches, unscaled; false on overflow.
  bool FinishGradient();
  TrainStats AccumulateTransitions(const torch::Tensor& observations,
                                   const torch::Tensor& next_observations,
                                   const torch::Tensor& actions, const torch::Tensor& returns,
                                   const torch::Tensor& discounts, const torch::Tensor& weights);
  // AccumulateTransitions for a quantile network (ModelSpec::quantiles).
  TrainStats AccumulateQuantiles(const torch::Tensor& observations,
                                 const torch::Tensor& next_observations,
                                 const torch::Tensor& actions, const torch::Tensor& returns,
                                 const torch::Tensor& discounts, const torch::Tensor& weights);
  torch::Tensor ActQ(const uint8_t* observation);  // [1, actions], for one observation.
  void CopyGradient(std::vector<float>* out);

  LearnerOptions options_;
  ModelInfo model_;
  QNetwork online_;
  QNetwork target_;
  std::unique_ptr<torch::optim::Adam> optimizer_;
  int accumulated_ = 0;
  double loss_scale_ = 1.0;  // AMP's dynamic loss scale.
  int good_steps_ = 0;
  torch::Tensor act_input_;  // Reused [1, C, H, W] buffer for GreedyAction.
  torch::Tensor mirror_actions_;  // int64 [num_actions] on the device; undefined: no mirroring.
  torch::Tensor mirror_rows_;     // bool [N]: the samples Accumulate mirrors (every other one).
  torch::Tensor quantile_midpoints_;  // float [1, quantiles, 1]: (2i + 1) / 2N, on the device.
  std::optional<torch::Generator> shift_generator_;  // Draws the random shifts (seeded).
};

}  // namespace convoy::agent

#endif  // CONVOY_AGENT_LEARNING_LEARNER_H_
