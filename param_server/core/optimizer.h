// Optimizers applied to the flat master buffer: Adam (default), AdamW, RMSprop, SGD with momentum,
// and the `delta` rule (w += pushed tensor) for agents that push weight deltas.
#ifndef CONVOY_PARAM_SERVER_CORE_OPTIMIZER_H_
#define CONVOY_PARAM_SERVER_CORE_OPTIMIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/settings/run_defaults.h"
#include "param_server/core/server_part.h"

namespace convoy::ps {

// The server's update rule. Named on flags, in RunConfig and in checkpoint manifests by
// OptimizerName.
enum class Optimizer { kAdam, kAdamW, kRmsprop, kSgd, kDelta };

// "adam", "adamw", "rmsprop", "sgd", "delta".
absl::string_view OptimizerName(Optimizer optimizer);

// The optimizer `name` names. Errors: INVALID_ARGUMENT naming it and listing the known names.
absl::StatusOr<Optimizer> ParseOptimizer(absl::string_view name);

// Abseil flag support (--optimizer=sgd): parsed once, where the flag is read.
bool AbslParseFlag(absl::string_view text, Optimizer* optimizer, std::string* error);
std::string AbslUnparseFlag(Optimizer optimizer);

// The optimizer's own settings (convoy_ps's flags). Its learning rate is a run setting
// (common/settings/run_settings.h), handed to agents too: OptimizerOptions adds it.
struct OptimizerSettings {
  Optimizer kind = Optimizer::kAdam;
  double beta1 = 0.9;    // Adam's first-moment decay.
  double beta2 = 0.999;  // Adam's second-moment decay.
  double eps = 1e-8;
  double weight_decay = 0.0;  // L2 for adam/rmsprop/sgd, decoupled for adamw.
  double momentum = 0.9;      // SGD and RMSprop momentum.
  double rmsprop_alpha = 0.99;
  double max_grad_norm = 0.0;  // Clip the pushed gradient's L2 norm to this; 0 disables.
};

struct OptimizerOptions : OptimizerSettings {
  double learning_rate = run_defaults::kLearningRate;
};

// Errors: INVALID_ARGUMENT naming the bad option.
absl::Status ValidateOptimizerOptions(const OptimizerOptions& options);

// One push's tensor in an optimizer step (FlatOptimizer::Step).
struct StepInput {
  float* values = nullptr;  // The pushed tensor, model-sized; consumed.
  uint32_t minibatches = 1;
  double lr_scale = 1.0;  // From staleness scaling.
};

// The minibatch-weighted mean of `inputs`' tensors (each `size` elements), g = sum_i (m_i / M) x_i
// with M = sum_i m_i, summed in the inputs' order with the weights rounded to float, written into
// inputs[0].values (the others are left as they were). Returns the minibatch-weighted mean of
// their lr scales. Element by element the arithmetic is the same whatever the threads (LibTorch's
// intra-op pool splits the elements into ranges), so a replay that combines the same pushes in the
// same order gets the same bits (tests/cluster/chaos_replay.cc). One input is left as it is.
double CombineGradients(const std::vector<StepInput>& inputs, size_t size);

// The threads an optimizer step runs on: LibTorch's intra-op pool, which splits each element-wise
// pass (CombineGradients, the optimizer's own) into ranges of the parameters, as ps-lite gives each
// key range a thread. Process-wide; 0 leaves LibTorch's default (one per core).
void SetApplyThreads(uint32_t threads);
// The threads a step runs on now.
int ApplyThreads();

// Updates `weights[0..size)` in place from pushed tensors. Not thread-safe: the parameter server's
// single writer owns it. The weights buffer must outlive the optimizer and never move. A part of
// the server (server_part.h): its state is checkpointed and restored with the run.
class FlatOptimizer : public ServerPart {
 public:
  static absl::StatusOr<std::unique_ptr<FlatOptimizer>> Create(const OptimizerOptions& options,
                                                               float* weights, size_t size);
  virtual ~FlatOptimizer() = default;

  // One update from `pushed` (a gradient, or for `delta` a weight delta), with the learning rate
  // (for delta: the delta) multiplied by `lr_scale` (staleness scaling). `pushed[0..size)` is
  // consumed: gradient clipping scales it in place.
  virtual void Apply(float* pushed, double lr_scale) = 0;

  // One optimizer step from the pushes one drained batch accepted, in order; the inputs' tensors
  // are consumed. Gradients (adam, adamw, rmsprop, sgd): one step on their minibatch-weighted mean
  // (CombineGradients; --max_grad_norm clips the mean), with the mean of their lr scales, as
  // TensorFlow's SyncReplicasOptimizer and PyTorch's batch-update parameter server step once on
  // the sum of what they gathered. The delta rule: each delta in turn, as if each were a step of
  // its own (deltas add; each is clipped alone). One input is exactly Apply(values, lr_scale).
  virtual void Step(const std::vector<StepInput>& inputs) = 0;

  // The optimizer's state (moments, step counts) as bytes in LibTorch's archive format, and back.
  // Restore errors: INVALID_ARGUMENT when the bytes do not hold this optimizer's state.
  virtual absl::StatusOr<std::string> SaveState() const = 0;
  virtual absl::Status RestoreState(const std::string& bytes) = 0;

  const OptimizerOptions& options() const { return options_; }

  // The state and the optimizer's name, into a checkpoint.
  absl::Status SaveTo(absl::Mutex& mu, CheckpointData& data) const override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Continues the state a checkpoint holds; state of another optimizer is dropped with a warning,
  // and the optimizer starts fresh. Errors: DATA_LOSS when the state does not fit.
  absl::Status Restore(absl::Mutex& mu, LoadedCheckpoint& checkpoint) override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

 protected:
  explicit FlatOptimizer(const OptimizerOptions& options) : options_(options) {}
  OptimizerOptions options_;
};

}  // namespace convoy::ps

#endif  // CONVOY_PARAM_SERVER_CORE_OPTIMIZER_H_
