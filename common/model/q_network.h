// Q-networks the agents train and the parameter server holds, built by name.
//
// This header includes LibTorch; code that only needs a model's identity or flat size includes
// model_registry.h instead.
#ifndef CONVOY_COMMON_MODEL_Q_NETWORK_H_
#define CONVOY_COMMON_MODEL_Q_NETWORK_H_

#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model/model_registry.h"

namespace convoy {

// A Q-network: maps a batch of observations [N, C, H, W] (float, scaled to [0, 1]) to Q-values [N, actions].
class QNetworkImpl : public torch::nn::Module {
 public:
  explicit QNetworkImpl(const ModelSpec& spec);

  // Q-values [N, actions]; for a quantile network, the mean of each action's quantiles.
  torch::Tensor forward(torch::Tensor x);
  // A quantile network's quantiles [N, actions, spec().quantiles], ascending in intent (the loss
  // pulls the i-th towards the (2i + 1) / 2N quantile; nothing forces the order). For a network
  // without quantiles, the Q-values as one quantile each, [N, actions, 1].
  torch::Tensor quantiles(torch::Tensor x);

  const ModelSpec& spec() const { return spec_; }

 private:
  ModelSpec spec_;
  torch::nn::Sequential features_{nullptr};
  // Without a dueling head: head_ maps features to Q-values. With one: value_ and advantage_ streams
  // share hidden_, and Q = V + A - mean(A).
  torch::nn::Sequential hidden_{nullptr};
  torch::nn::Linear head_{nullptr};
  torch::nn::Linear value_{nullptr};
  torch::nn::Linear advantage_{nullptr};
};
TORCH_MODULE(QNetwork);

// Builds the named network with freshly initialised weights drawn from `seed` (LibTorch's default
// initialisation under torch::manual_seed(seed)). Errors: INVALID_ARGUMENT naming the unknown model.
absl::StatusOr<QNetwork> BuildQNetwork(const ModelSpec& spec, uint64_t seed);

// Parameters in named_parameters() order: the flat layout every convoy component shares.
std::vector<ParameterSlot> ParameterLayoutOf(torch::nn::Module& module);

// The model identity: a digest of the architecture name and every parameter's name, shape and dtype.
std::string FingerprintOf(const std::string& model_name, torch::nn::Module& module);

// The identity and flat layout of `module`, a network built from `spec`: what DescribeModel
// reports, read off a network the caller already holds (so it is not built a second time).
ModelInfo ModelInfoOf(const ModelSpec& spec, torch::nn::Module& module);

// Copies every parameter, in layout order, into `out` (resized to the parameter count).
void FlattenParameters(torch::nn::Module& module, std::vector<float>* out);

// Overwrites every parameter from `flat` (layout order). Errors: INVALID_ARGUMENT on a size mismatch.
absl::Status LoadFlatParameters(const float* flat, size_t count, torch::nn::Module& module);

}  // namespace convoy

#endif  // CONVOY_COMMON_MODEL_Q_NETWORK_H_
