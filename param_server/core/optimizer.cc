#include "param_server/core/optimizer.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/model/torch_compat.h"  // After LibTorch: glog's LOG.
#include "common/support/status_macros.h"
#include "glog/logging.h"

namespace convoy::ps {
namespace {

// Elements per task of LibTorch's intra-op pool when combining pushes: large enough that a task's
// overhead is noise, small enough that a cookbook-sized model spreads over a machine's cores.
constexpr int64_t kCombineGrain = int64_t{1} << 15;

// The LibTorch optimizers, run on a single parameter that views the master buffer.
class TorchFlatOptimizer final : public FlatOptimizer {
 public:
  TorchFlatOptimizer(const OptimizerOptions& options, float* weights, size_t size)
      : FlatOptimizer(options),
        size_(static_cast<int64_t>(size)),
        param_(torch::from_blob(weights, {size_}, torch::kFloat32).set_requires_grad(true)) {
    std::vector<torch::Tensor> params = {param_};
    const auto betas = std::make_tuple(options.beta1, options.beta2);
    switch (options.kind) {
      case Optimizer::kAdam:
        optimizer_ = std::make_unique<torch::optim::Adam>(
            params, torch::optim::AdamOptions(options.learning_rate)
                        .betas(betas)
                        .eps(options.eps)
                        .weight_decay(options.weight_decay));
        return;
      case Optimizer::kAdamW:
        optimizer_ = std::make_unique<torch::optim::AdamW>(
            params, torch::optim::AdamWOptions(options.learning_rate)
                        .betas(betas)
                        .eps(options.eps)
                        .weight_decay(options.weight_decay));
        return;
      case Optimizer::kRmsprop:
        optimizer_ = std::make_unique<torch::optim::RMSprop>(
            params, torch::optim::RMSpropOptions(options.learning_rate)
                        .alpha(options.rmsprop_alpha)
                        .eps(options.eps)
                        .weight_decay(options.weight_decay)
                        .momentum(options.momentum));
        return;
      case Optimizer::kSgd:
        optimizer_ = std::make_unique<torch::optim::SGD>(
            params, torch::optim::SGDOptions(options.learning_rate)
                        .momentum(options.momentum)
                        .weight_decay(options.weight_decay));
        return;
      case Optimizer::kDelta:
        break;
    }
    LOG(FATAL) << "the delta rule is not a LibTorch optimizer";
  }

  void Apply(float* pushed, double lr_scale) override {
    torch::NoGradGuard no_grad;
    torch::Tensor grad = torch::from_blob(pushed, {size_}, torch::kFloat32);
    ClipNorm(grad, options_.max_grad_norm);
    param_.mutable_grad() = grad;
    SetLearningRate(options_.learning_rate * lr_scale);
    optimizer_->step();
    param_.mutable_grad() = torch::Tensor();  // Do not keep a view of the caller's buffer.
  }

  void Step(const std::vector<StepInput>& inputs) override {
    if (inputs.empty()) return;
    const double lr_scale = CombineGradients(inputs, static_cast<size_t>(size_));
    Apply(inputs.front().values, lr_scale);
  }

  absl::StatusOr<std::string> SaveState() const override {
    torch::serialize::OutputArchive archive;
    optimizer_->save(archive);
    std::ostringstream out;
    archive.save_to(out);
    return std::move(out).str();
  }

  absl::Status RestoreState(const std::string& bytes) override {
    try {
      std::istringstream in(bytes);
      torch::serialize::InputArchive archive;
      archive.load_from(in);
      optimizer_->load(archive);
    } catch (const c10::Error& e) {
      return absl::InvalidArgumentError(absl::StrCat("optimizer state does not match '",
                                                     OptimizerName(options_.kind),
                                                     "': ", e.what_without_backtrace()));
    }
    return absl::OkStatus();
  }

  static void ClipNorm(torch::Tensor& grad, double max_norm) {
    if (max_norm <= 0) return;
    const double norm = grad.norm().item<double>();
    if (norm > max_norm) grad.mul_(max_norm / (norm + 1e-6));
  }

 private:
  void SetLearningRate(double lr) {
    for (torch::optim::OptimizerParamGroup& group : optimizer_->param_groups()) {
      group.options().set_lr(lr);
    }
  }

  int64_t size_;
  torch::Tensor param_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
};

// w += lr_scale * delta: the cookbook's agents pushed weight deltas computed by their own
// optimizers.
class DeltaOptimizer final : public FlatOptimizer {
 public:
  DeltaOptimizer(const OptimizerOptions& options, float* weights, size_t size)
      : FlatOptimizer(options),
        weights_(torch::from_blob(weights, {static_cast<int64_t>(size)}, torch::kFloat32)),
        size_(static_cast<int64_t>(size)) {}

  void Apply(float* pushed, double lr_scale) override {
    torch::NoGradGuard no_grad;
    torch::Tensor delta = torch::from_blob(pushed, {size_}, torch::kFloat32);
    TorchFlatOptimizer::ClipNorm(delta, options_.max_grad_norm);
    weights_.add_(delta, lr_scale);
  }

  void Step(const std::vector<StepInput>& inputs) override {
    for (const StepInput& input : inputs) Apply(input.values, input.lr_scale);
  }

  absl::StatusOr<std::string> SaveState() const override { return std::string(); }
  absl::Status RestoreState(const std::string& bytes) override {
    if (!bytes.empty()) {
      return absl::InvalidArgumentError(
          "the delta rule keeps no state, but the checkpoint holds some");
    }
    return absl::OkStatus();
  }

 private:
  torch::Tensor weights_;
  int64_t size_;
};

}  // namespace

void SetApplyThreads(uint32_t threads) {
  if (threads > 0) at::set_num_threads(static_cast<int>(threads));
}

int ApplyThreads() { return at::get_num_threads(); }

double CombineGradients(const std::vector<StepInput>& inputs, size_t size) {
  if (inputs.size() <= 1) return inputs.empty() ? 1.0 : inputs.front().lr_scale;
  double minibatches = 0;
  for (const StepInput& input : inputs) minibatches += input.minibatches;
  std::vector<float> weights;
  double lr_scale = 0;
  for (const StepInput& input : inputs) {
    const double share = input.minibatches / minibatches;
    weights.push_back(static_cast<float>(share));
    lr_scale += share * input.lr_scale;
  }
  float* const out = inputs.front().values;
  at::parallel_for(0, static_cast<int64_t>(size), kCombineGrain, [&](int64_t begin, int64_t end) {
    // One pass per input over a range that stays in cache, each a loop the compiler vectorises;
    // element by element the sum is ((w0 x0 + w1 x1) + w2 x2) + ..., in the inputs' order.
    const float w0 = weights[0];
    for (int64_t j = begin; j < end; ++j) out[j] = w0 * out[j];
    for (size_t i = 1; i < inputs.size(); ++i) {
      const float w = weights[i];
      const float* const x = inputs[i].values;
      for (int64_t j = begin; j < end; ++j) out[j] += w * x[j];
    }
  });
  return lr_scale;
}

absl::Status FlatOptimizer::SaveTo(absl::Mutex&, CheckpointData& data) const {
  CONVOY_ASSIGN_OR_RETURN(data.optimizer_state, SaveState());
  data.manifest.set_optimizer(std::string(OptimizerName(options_.kind)));
  return absl::OkStatus();
}

absl::Status FlatOptimizer::Restore(absl::Mutex&, LoadedCheckpoint& checkpoint) {
  if (checkpoint.manifest.optimizer() != OptimizerName(options_.kind)) {
    LOG(WARNING) << "checkpoint " << checkpoint.path << " was written with optimizer '"
                 << checkpoint.manifest.optimizer() << "'; starting '"
                 << OptimizerName(options_.kind) << "' with fresh state";
    return absl::OkStatus();
  }
  if (absl::Status s = RestoreState(checkpoint.optimizer_state); !s.ok()) {
    return absl::DataLossError(absl::StrCat(checkpoint.path, ": ", s.message()));
  }
  return absl::OkStatus();
}

absl::string_view OptimizerName(Optimizer optimizer) {
  switch (optimizer) {
    case Optimizer::kAdam:
      return "adam";
    case Optimizer::kAdamW:
      return "adamw";
    case Optimizer::kRmsprop:
      return "rmsprop";
    case Optimizer::kSgd:
      return "sgd";
    case Optimizer::kDelta:
      return "delta";
  }
  return "unknown";
}

absl::StatusOr<Optimizer> ParseOptimizer(absl::string_view name) {
  for (Optimizer optimizer : {Optimizer::kAdam, Optimizer::kAdamW, Optimizer::kRmsprop,
                              Optimizer::kSgd, Optimizer::kDelta}) {
    if (name == OptimizerName(optimizer)) return optimizer;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown optimizer '", name, "'; expected adam, adamw, rmsprop, sgd or delta"));
}

bool AbslParseFlag(absl::string_view text, Optimizer* optimizer, std::string* error) {
  absl::StatusOr<Optimizer> parsed = ParseOptimizer(text);
  if (!parsed.ok()) {
    *error = std::string(parsed.status().message());
    return false;
  }
  *optimizer = *parsed;
  return true;
}

std::string AbslUnparseFlag(Optimizer optimizer) { return std::string(OptimizerName(optimizer)); }

absl::Status ValidateOptimizerOptions(const OptimizerOptions& o) {
  if (!(o.learning_rate > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("learning rate must be > 0, got ", o.learning_rate));
  }
  if (o.beta1 < 0 || o.beta1 >= 1 || o.beta2 < 0 || o.beta2 >= 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("betas must be in [0, 1), got ", o.beta1, ", ", o.beta2));
  }
  if (!(o.eps > 0)) return absl::InvalidArgumentError(absl::StrCat("eps must be > 0, got ", o.eps));
  if (o.weight_decay < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("weight decay must be >= 0, got ", o.weight_decay));
  }
  if (o.momentum < 0) {
    return absl::InvalidArgumentError(absl::StrCat("momentum must be >= 0, got ", o.momentum));
  }
  if (o.max_grad_norm < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_grad_norm must be >= 0, got ", o.max_grad_norm));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<FlatOptimizer>> FlatOptimizer::Create(
    const OptimizerOptions& options, float* weights, size_t size) {
  CONVOY_RETURN_IF_ERROR(ValidateOptimizerOptions(options));
  if (options.kind == Optimizer::kDelta)
    return std::make_unique<DeltaOptimizer>(options, weights, size);
  return std::make_unique<TorchFlatOptimizer>(options, weights, size);
}

}  // namespace convoy::ps
