#include "param_server/core/target_network.h"

#include <memory>
#include <utility>
#include <vector>

#include "common/settings/exploration.h"
#include "glog/logging.h"

namespace convoy::ps {

void TargetNetwork::Publish(std::shared_ptr<const WeightSnapshot> weights, uint64_t version) {
  absl::MutexLock lock(&published_mu_);
  weights_ = std::move(weights);
  version_ = version;
}

void TargetNetwork::Start(absl::Mutex&, std::shared_ptr<const WeightSnapshot> initial) {
  minibatches_at_copy_ = 0;
  Publish(std::move(initial), 0);
}

absl::Status TargetNetwork::Restore(absl::Mutex&, LoadedCheckpoint& checkpoint) {
  const v1::CheckpointManifest& manifest = checkpoint.manifest;
  auto weights = std::make_shared<WeightSnapshot>();
  weights->version = manifest.target_version();
  weights->values = std::move(checkpoint.target);
  minibatches_at_copy_ = manifest.minibatches_at_target();
  Publish(std::move(weights), manifest.target_version());
  return absl::OkStatus();
}

absl::Status TargetNetwork::SaveTo(absl::Mutex&, CheckpointData& data) const {
  absl::MutexLock lock(&published_mu_);
  data.target = weights_;
  data.manifest.set_target_version(version_);
  data.manifest.set_minibatches_at_target(minibatches_at_copy_);
  return absl::OkStatus();
}

void TargetNetwork::Applied(absl::Mutex&, const AppliedStep& step) {
  if (!TargetRefreshDue(step.applied_minibatches, minibatches_at_copy_, update_frequency_)) return;
  minibatches_at_copy_ = step.applied_minibatches;
  if (tau_ >= 1.0) {
    Publish(step.published, step.published->version);
    return;
  }
  // Polyak's soft copy, into a snapshot of its own: pulls may hold the old one.
  const std::shared_ptr<const WeightSnapshot> before = Snapshot();
  auto moved = std::make_shared<WeightSnapshot>();
  moved->version = step.published->version;
  const std::vector<float>& online = step.published->values;
  CHECK_EQ(before->values.size(), online.size());
  moved->values.resize(online.size());
  const float tau = static_cast<float>(tau_);
  for (size_t i = 0; i < online.size(); ++i) {
    moved->values[i] = before->values[i] + tau * (online[i] - before->values[i]);
  }
  Publish(std::move(moved), step.published->version);
}

std::shared_ptr<const WeightSnapshot> TargetNetwork::Snapshot() const {
  absl::MutexLock lock(&published_mu_);
  return weights_;
}

uint64_t TargetNetwork::version() const {
  absl::MutexLock lock(&published_mu_);
  return version_;
}

}  // namespace convoy::ps
