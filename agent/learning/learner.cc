#include "agent/learning/learner.h"

#include <glog/logging.h>

#include <algorithm>
#include <cstring>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/model/torch_compat.h"
#include "common/support/status_macros.h"

namespace convoy::agent {
namespace {

constexpr double kInitialLossScale = 65536.0;
constexpr int kLossScaleGrowthInterval = 2000;

// Enables CUDA autocast for the current scope.
class AutocastScope {
 public:
  explicit AutocastScope(bool enabled) : enabled_(enabled) {
    if (enabled_) torch_compat::SetCudaAutocastEnabled(true);
  }
  ~AutocastScope() {
    if (enabled_) {
      torch_compat::SetCudaAutocastEnabled(false);
      at::autocast::clear_cache();
    }
  }

 private:
  bool enabled_;
};

torch::Tensor ToFloatImages(const torch::Tensor& images) {
  return images.to(torch::kFloat32).div_(255.0f);
}

}  // namespace

// Two gathers, one along the rows and one along the columns.
torch::Tensor RandomShift(const torch::Tensor& images, int pad, torch::Generator& generator) {
  const int64_t n = images.size(0), c = images.size(1), h = images.size(2), w = images.size(3);
  const torch::TensorOptions index = torch::TensorOptions().dtype(torch::kInt64);
  const torch::Tensor dy = torch::randint(-pad, pad + 1, {n, 1}, generator, index);
  const torch::Tensor dx = torch::randint(-pad, pad + 1, {n, 1}, generator, index);
  const torch::Tensor rows =
      (torch::arange(h, index).unsqueeze(0) + dy).clamp(0, h - 1).to(images.device());
  const torch::Tensor cols =
      (torch::arange(w, index).unsqueeze(0) + dx).clamp(0, w - 1).to(images.device());
  return images.gather(2, rows.view({n, 1, h, 1}).expand({n, c, h, w}))
      .gather(3, cols.view({n, 1, 1, w}).expand({n, c, h, w}));
}

absl::StatusOr<std::unique_ptr<DqnLearner>> DqnLearner::Create(const LearnerOptions& options) {
  if (options.amp && !options.device.is_cuda()) {
    return absl::FailedPreconditionError("--amp needs a CUDA device");
  }
  if (!options.mirror_actions.empty()) {
    const auto& m = options.mirror_actions;
    if (static_cast<int>(m.size()) != options.num_actions) {
      return absl::InvalidArgumentError(absl::StrCat(
          "mirror_actions names ", m.size(), " actions, the learner has ", options.num_actions));
    }
    for (size_t a = 0; a < m.size(); ++a) {
      if (m[a] < 0 || m[a] >= static_cast<int64_t>(m.size()) ||
          m[m[a]] != static_cast<int64_t>(a)) {
        return absl::InvalidArgumentError(
            absl::StrCat("mirror_actions is not an involution over the actions at action ", a));
      }
    }
  }
  CONVOY_ASSIGN_OR_RETURN(ModelSpec spec, ResolveModel(options.model, options.num_actions));
  CONVOY_ASSIGN_OR_RETURN(QNetwork online, BuildQNetwork(spec, options.seed));
  CONVOY_ASSIGN_OR_RETURN(QNetwork target, BuildQNetwork(spec, options.seed));
  ModelInfo model = ModelInfoOf(spec, *online);
  return std::unique_ptr<DqnLearner>(
      new DqnLearner(options, std::move(model), std::move(online), std::move(target)));
}

DqnLearner::DqnLearner(const LearnerOptions& options, ModelInfo model, QNetwork online,
                       QNetwork target)
    : options_(options), model_(std::move(model)), online_(online), target_(target) {
  online_->to(options_.device);
  target_->to(options_.device);
  target_->eval();
  for (torch::Tensor& p : target_->parameters()) p.set_requires_grad(false);
  optimizer_ = std::make_unique<torch::optim::Adam>(
      online_->parameters(), torch::optim::AdamOptions(options_.learning_rate));
  const ModelSpec& s = model_.spec;
  act_input_ = torch::empty({1, s.channels, s.height, s.width}, torch::kUInt8);
  if (options_.amp) loss_scale_ = kInitialLossScale;
  if (!options_.mirror_actions.empty()) {
    mirror_actions_ = torch::tensor(options_.mirror_actions, torch::kInt64).to(options_.device);
  }
  if (options_.random_shift > 0) {
    shift_generator_ = at::detail::createCPUGenerator(options_.seed);
  }
}

torch::Tensor DqnLearner::ActQ(const uint8_t* observation) {
  torch::NoGradGuard no_grad;
  std::memcpy(act_input_.data_ptr<uint8_t>(), observation, static_cast<size_t>(act_input_.numel()));
  online_->eval();
  AutocastScope autocast(options_.amp);
  return online_->forward(ToFloatImages(act_input_.to(options_.device)));
}

int DqnLearner::GreedyAction(const uint8_t* observation) {
  return static_cast<int>(ActQ(observation).argmax(1).item<int64_t>());
}

int DqnLearner::QValues(const uint8_t* observation, std::vector<float>* q) {
  const torch::Tensor values = ActQ(observation).to(torch::kCPU, torch::kFloat).contiguous();
  q->assign(values.data_ptr<float>(), values.data_ptr<float>() + values.numel());
  return static_cast<int>(std::max_element(q->begin(), q->end()) - q->begin());
}

TrainStats DqnLearner::Accumulate(const torch::Tensor& observations,
                                  const torch::Tensor& next_observations,
                                  const torch::Tensor& actions, const torch::Tensor& returns,
                                  const torch::Tensor& discounts, const torch::Tensor& weights) {
  torch::Tensor obs = observations, next = next_observations, taken = actions;
  if (mirror_actions_.defined()) {
    const int64_t n = observations.size(0);
    if (!mirror_rows_.defined() || mirror_rows_.size(0) != n) {
      mirror_rows_ = (torch::arange(n, torch::kInt64) % 2 == 1).to(observations.device());
    }
    const torch::Tensor rows = mirror_rows_.view({n, 1, 1, 1});
    obs = torch::where(rows, obs.flip({3}), obs);
    next = torch::where(rows, next.flip({3}), next);
    taken = torch::where(mirror_rows_, mirror_actions_.index_select(0, actions), actions);
  }
  if (shift_generator_.has_value()) {
    obs = RandomShift(obs, options_.random_shift, *shift_generator_);
    next = RandomShift(next, options_.random_shift, *shift_generator_);
  }
  return AccumulateTransitions(obs, next, taken, returns, discounts, weights);
}

TrainStats DqnLearner::AccumulateTransitions(const torch::Tensor& observations,
                                             const torch::Tensor& next_observations,
                                             const torch::Tensor& actions,
                                             const torch::Tensor& returns,
                                             const torch::Tensor& discounts,
                                             const torch::Tensor& weights) {
  if (model_.spec.quantiles > 0) {
    return AccumulateQuantiles(observations, next_observations, actions, returns, discounts,
                               weights);
  }
  torch::Tensor target;
  {
    torch::NoGradGuard no_grad;
    AutocastScope autocast(options_.amp);
    const torch::Tensor next = ToFloatImages(next_observations);
    online_->eval();
    torch::Tensor next_target_q = target_->forward(next).to(torch::kFloat32);
    torch::Tensor next_value;
    if (options_.double_dqn) {
      const torch::Tensor next_actions = online_->forward(next).argmax(1, /*keepdim=*/true);
      next_value = next_target_q.gather(1, next_actions).squeeze(1);
    } else {
      next_value = std::get<0>(next_target_q.max(1));
    }
    target = returns + discounts * next_value;
  }
  online_->train();
  torch::Tensor q;
  {
    AutocastScope autocast(options_.amp);
    q = online_->forward(ToFloatImages(observations)).to(torch::kFloat32);
  }
  const torch::Tensor q_taken = q.gather(1, actions.unsqueeze(1)).squeeze(1);
  const torch::Tensor per_sample =
      torch::nn::functional::huber_loss(q_taken, target,
                                        torch::nn::functional::HuberLossFuncOptions()
                                            .reduction(torch::kNone)
                                            .delta(options_.huber_delta));
  const torch::Tensor loss = (weights * per_sample).mean();
  (loss * loss_scale_).backward();
  ++accumulated_;

  TrainStats stats;
  stats.loss = loss.item<double>();
  stats.mean_q = q_taken.detach().mean().item<double>();
  const torch::Tensor td = (target - q_taken.detach()).abs().to(torch::kCPU).contiguous();
  stats.td_errors.assign(td.data_ptr<float>(), td.data_ptr<float>() + td.numel());
  return stats;
}

// QR-DQN's update (Dabney et al. 2018): the taken action's N quantiles regressed towards the n-step
// target's N samples (the reward plus the discounted quantiles of the next state's action, chosen
// by the online network's means under Double DQN) with the quantile Huber loss, summed over the
// quantiles and averaged over the target's samples. The priority is the TD error of the means.
TrainStats DqnLearner::AccumulateQuantiles(const torch::Tensor& observations,
                                           const torch::Tensor& next_observations,
                                           const torch::Tensor& actions,
                                           const torch::Tensor& returns,
                                           const torch::Tensor& discounts,
                                           const torch::Tensor& weights) {
  const int64_t n = observations.size(0), quantiles = model_.spec.quantiles;
  torch::Tensor target;  // [N, quantiles]
  {
    torch::NoGradGuard no_grad;
    AutocastScope autocast(options_.amp);
    const torch::Tensor next = ToFloatImages(next_observations);
    online_->eval();
    const torch::Tensor next_target = target_->quantiles(next).to(torch::kFloat32);
    const torch::Tensor next_actions =
        (options_.double_dqn ? online_->forward(next).to(torch::kFloat32) : next_target.mean(2))
            .argmax(1)
            .view({n, 1, 1})
            .expand({n, 1, quantiles});
    target = returns.unsqueeze(1) +
             discounts.unsqueeze(1) * next_target.gather(1, next_actions).squeeze(1);
  }
  online_->train();
  torch::Tensor z;
  {
    AutocastScope autocast(options_.amp);
    z = online_->quantiles(ToFloatImages(observations)).to(torch::kFloat32);
  }
  const torch::Tensor z_taken =
      z.gather(1, actions.view({n, 1, 1}).expand({n, 1, quantiles})).squeeze(1);  // [N, quantiles]
  if (!quantile_midpoints_.defined()) {
    quantile_midpoints_ = ((torch::arange(quantiles, torch::kFloat32) + 0.5) / quantiles)
                              .view({1, quantiles, 1})
                              .to(z.device());
  }
  // u[b, i, j] = target_j - z_i: the j-th target sample against the i-th quantile.
  const torch::Tensor u = target.unsqueeze(1) - z_taken.unsqueeze(2);
  const torch::Tensor huber =
      torch::nn::functional::huber_loss(u, torch::zeros_like(u),
                                        torch::nn::functional::HuberLossFuncOptions()
                                            .reduction(torch::kNone)
                                            .delta(options_.huber_delta));
  const torch::Tensor below = u.detach().lt(0).to(torch::kFloat32);
  const torch::Tensor per_sample =
      ((quantile_midpoints_ - below).abs() * huber / options_.huber_delta).mean(2).sum(1);
  const torch::Tensor loss = (weights * per_sample).mean();
  (loss * loss_scale_).backward();
  ++accumulated_;

  TrainStats stats;
  stats.loss = loss.item<double>();
  const torch::Tensor q_taken = z_taken.detach().mean(1);
  stats.mean_q = q_taken.mean().item<double>();
  const torch::Tensor td = (target.mean(1) - q_taken).abs().to(torch::kCPU).contiguous();
  stats.td_errors.assign(td.data_ptr<float>(), td.data_ptr<float>() + td.numel());
  return stats;
}

bool DqnLearner::FinishGradient() {
  torch::NoGradGuard no_grad;
  const double scale = 1.0 / (loss_scale_ * std::max(1, accumulated_));
  bool finite = true;
  for (torch::Tensor& p : online_->parameters()) {
    if (!p.grad().defined()) continue;
    p.mutable_grad().mul_(scale);
    if (options_.amp && !torch::isfinite(p.grad()).all().item<bool>()) finite = false;
  }
  accumulated_ = 0;
  if (options_.amp) {
    if (!finite) {
      loss_scale_ = std::max(1.0, loss_scale_ / 2);
      good_steps_ = 0;
      optimizer_->zero_grad();
      return false;
    }
    if (++good_steps_ % kLossScaleGrowthInterval == 0) loss_scale_ *= 2;
  }
  if (options_.max_grad_norm > 0) {
    torch::nn::utils::clip_grad_norm_(online_->parameters(), options_.max_grad_norm);
  }
  return true;
}

void DqnLearner::CopyGradient(std::vector<float>* out) {
  out->assign(model_.parameter_count, 0.0f);
  size_t offset = 0;
  for (torch::Tensor& p : online_->parameters()) {
    if (p.grad().defined()) {
      torch::Tensor g = p.grad().to(torch::kCPU, torch::kFloat32).contiguous();
      std::memcpy(out->data() + offset, g.data_ptr<float>(), g.numel() * sizeof(float));
    }
    offset += static_cast<size_t>(p.numel());
  }
}

bool DqnLearner::TakeMeanGradient(std::vector<float>* out) {
  const bool ok = FinishGradient();
  if (ok) {
    CopyGradient(out);
  } else {
    out->assign(model_.parameter_count, 0.0f);
  }
  optimizer_->zero_grad();
  return ok;
}

bool DqnLearner::StepLocal(std::vector<float>* mean_gradient) {
  const bool ok = FinishGradient();
  if (ok) {
    if (mean_gradient != nullptr) CopyGradient(mean_gradient);
    optimizer_->step();
  }
  optimizer_->zero_grad();
  return ok;
}

void DqnLearner::SetLearningRateScale(double scale) {
  for (torch::optim::OptimizerParamGroup& group : optimizer_->param_groups()) {
    group.options().set_lr(options_.learning_rate * scale);
  }
}

void DqnLearner::SetWeights(const std::vector<float>& flat) {
  const absl::Status loaded = LoadFlatParameters(flat.data(), flat.size(), *online_);
  CHECK(loaded.ok()) << loaded;  // Sizes come from the same model: a mismatch is a bug.
}

void DqnLearner::SetTargetWeights(const std::vector<float>& flat) {
  const absl::Status loaded = LoadFlatParameters(flat.data(), flat.size(), *target_);
  CHECK(loaded.ok()) << loaded;
}

void DqnLearner::CopyOnlineToTarget() {
  std::vector<float> flat;
  FlattenParameters(*online_, &flat);
  SetTargetWeights(flat);
}

void DqnLearner::MoveTargetTowardOnline(double tau) {
  if (tau >= 1.0) {
    CopyOnlineToTarget();
    return;
  }
  torch::NoGradGuard no_grad;
  const std::vector<torch::Tensor> online = online_->parameters();
  std::vector<torch::Tensor> target = target_->parameters();
  for (size_t i = 0; i < target.size(); ++i) target[i].lerp_(online[i], tau);
}

void DqnLearner::GetWeights(std::vector<float>* flat) { FlattenParameters(*online_, flat); }

void DqnLearner::GetTargetWeights(std::vector<float>* flat) { FlattenParameters(*target_, flat); }

std::string DqnLearner::SaveState() {
  std::vector<float> online, target;
  FlattenParameters(*online_, &online);
  FlattenParameters(*target_, &target);
  torch::serialize::OutputArchive archive, optimizer;
  archive.write("online", torch::tensor(online));
  archive.write("target", torch::tensor(target));
  optimizer_->save(optimizer);
  archive.write("optimizer", optimizer);
  archive.write("loss_scale", torch::tensor(loss_scale_, torch::kFloat64));
  archive.write("good_steps", torch::tensor(static_cast<int64_t>(good_steps_), torch::kInt64));
  std::ostringstream out;
  archive.save_to(out);
  return out.str();
}

absl::Status DqnLearner::LoadState(const std::string& bytes) {
  torch::serialize::InputArchive archive, optimizer;
  torch::Tensor online, target, loss_scale, good_steps;
  try {
    std::istringstream in(bytes);
    archive.load_from(in, torch::kCPU);
    archive.read("online", online);
    archive.read("target", target);
    archive.read("optimizer", optimizer);
    archive.read("loss_scale", loss_scale);
    archive.read("good_steps", good_steps);
  } catch (const c10::Error& e) {
    return absl::DataLossError(absl::StrCat("not a learner state: ", e.what_without_backtrace()));
  }
  const int64_t count = static_cast<int64_t>(model_.parameter_count);
  for (const torch::Tensor* t : {&online, &target}) {
    if (t->scalar_type() != torch::kFloat || t->dim() != 1 || t->numel() != count) {
      return absl::FailedPreconditionError(absl::StrCat("the learner state holds ", t->numel(),
                                                        " parameters, model ", model_.spec.name,
                                                        " has ", count));
    }
  }
  const torch::Tensor online_cpu = online.contiguous(), target_cpu = target.contiguous();
  SetWeights({online_cpu.data_ptr<float>(), online_cpu.data_ptr<float>() + count});
  SetTargetWeights({target_cpu.data_ptr<float>(), target_cpu.data_ptr<float>() + count});
  try {
    optimizer_->load(optimizer);
    // The moments follow the parameters onto the learner's device.
    for (auto& entry : optimizer_->state()) {
      auto& adam = static_cast<torch::optim::AdamParamState&>(*entry.second);
      adam.exp_avg(adam.exp_avg().to(options_.device));
      adam.exp_avg_sq(adam.exp_avg_sq().to(options_.device));
      if (adam.max_exp_avg_sq().defined()) {
        adam.max_exp_avg_sq(adam.max_exp_avg_sq().to(options_.device));
      }
    }
  } catch (const c10::Error& e) {
    optimizer_ = std::make_unique<torch::optim::Adam>(
        online_->parameters(), torch::optim::AdamOptions(options_.learning_rate));
    return absl::DataLossError(
        absl::StrCat("the learner state's optimizer does not load: ", e.what_without_backtrace()));
  }
  loss_scale_ = loss_scale.item<double>();
  good_steps_ = static_cast<int>(good_steps.item<int64_t>());
  return absl::OkStatus();
}

}  // namespace convoy::agent
