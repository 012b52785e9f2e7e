// Optimizers applied to the flat master buffer: Adam (default), AdamW, RMSprop, SGD with momentum, and the
// `delta` rule (w += pushed tensor) for agents that push weight deltas.
#ifndef CONVOY_PARAM_SERVER_OPTIMIZER_H_
#define CONVOY_PARAM_SERVER_OPTIMIZER_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/run_defaults.h"

namespace convoy {

// The server's update rule. Named on flags, in RunConfig and in checkpoint manifests by OptimizerName.
enum class Optimizer { kAdam, kAdamW, kRmsprop, kSgd, kDelta };

// "adam", "adamw", "rmsprop", "sgd", "delta".
absl::string_view OptimizerName(Optimizer optimizer);

// The optimizer `name` names. Errors: INVALID_ARGUMENT naming it and listing the known names.
absl::StatusOr<Optimizer> ParseOptimizer(absl::string_view name);

// Abseil flag support (--optimizer=sgd): parsed once, where the flag is read.
bool AbslParseFlag(absl::string_view text, Optimizer* optimizer, std::string* error);
std::string AbslUnparseFlag(Optimizer optimizer);

struct OptimizerOptions {
  Optimizer kind = Optimizer::kAdam;
  double learning_rate = run_defaults::kLearningRate;
  double beta1 = 0.9;          // Adam's first-moment decay.
  double beta2 = 0.999;        // Adam's second-moment decay.
  double eps = 1e-8;
  double weight_decay = 0.0;   // L2 for adam/rmsprop/sgd, decoupled for adamw.
  double momentum = 0.9;       // SGD and RMSprop momentum.
  double rmsprop_alpha = 0.99;
  double max_grad_norm = 0.0;  // Clip the pushed gradient's L2 norm to this; 0 disables.
};

// Errors: INVALID_ARGUMENT naming the bad option.
absl::Status ValidateOptimizerOptions(const OptimizerOptions& options);

// Updates `weights[0..size)` in place from pushed tensors. Not thread-safe: the parameter server's single
// writer owns it. The weights buffer must outlive the optimizer and never move.
class FlatOptimizer {
 public:
  static absl::StatusOr<std::unique_ptr<FlatOptimizer>> Create(const OptimizerOptions& options,
                                                               float* weights, size_t size);
  virtual ~FlatOptimizer() = default;

  // One update from `pushed` (a gradient, or for `delta` a weight delta), with the learning rate (for delta:
  // the delta) multiplied by `lr_scale` (staleness scaling). `pushed[0..size)` is consumed: gradient
  // clipping scales it in place.
  virtual void Apply(float* pushed, double lr_scale) = 0;

  // The optimizer's state (moments, step counts) as bytes in LibTorch's archive format, and back. Restore
  // errors: INVALID_ARGUMENT when the bytes do not hold this optimizer's state.
  virtual absl::StatusOr<std::string> SaveState() const = 0;
  virtual absl::Status RestoreState(const std::string& bytes) = 0;

  const OptimizerOptions& options() const { return options_; }

 protected:
  explicit FlatOptimizer(const OptimizerOptions& options) : options_(options) {}
  OptimizerOptions options_;
};

}  // namespace convoy

#endif  // CONVOY_PARAM_SERVER_OPTIMIZER_H_
