#include "param_server/target_network.h"

#include <utility>

#include "common/exploration.h"

namespace convoy {

void TargetNetwork::Start(std::shared_ptr<const WeightSnapshot> initial) {
  absl::MutexLock lock(&mu_);
  weights_ = std::move(initial);
  version_ = 0;
  minibatches_at_copy_ = 0;
}

void TargetNetwork::Restore(const v1::CheckpointManifest& manifest, std::vector<float> values) {
  auto weights = std::make_shared<WeightSnapshot>();
  weights->version = manifest.target_version();
  weights->values = std::move(values);
  absl::MutexLock lock(&mu_);
  weights_ = std::move(weights);
  version_ = manifest.target_version();
  minibatches_at_copy_ = manifest.minibatches_at_target();
}

void TargetNetwork::SaveTo(CheckpointData& data) const {
  absl::MutexLock lock(&mu_);
  data.target = weights_;
  data.manifest.set_target_version(version_);
  data.manifest.set_minibatches_at_target(minibatches_at_copy_);
}

bool TargetNetwork::OnApplied(uint64_t applied_minibatches, const WeightStore& online) {
  absl::MutexLock lock(&mu_);
  if (!TargetRefreshDue(applied_minibatches, minibatches_at_copy_, update_frequency_)) return false;
  weights_ = online.Snapshot();
  version_ = weights_->version;
  minibatches_at_copy_ = applied_minibatches;
  return true;
}

std::shared_ptr<const WeightSnapshot> TargetNetwork::Snapshot() const {
  absl::MutexLock lock(&mu_);
  return weights_;
}

uint64_t TargetNetwork::version() const {
  absl::MutexLock lock(&mu_);
  return version_;
}

}  // namespace convoy
