#include "param_server/core/apply_counters.h"

#include <algorithm>

namespace convoy::ps {

void ApplyCounters::Applied(absl::Mutex&, const AppliedStep& step) {
  updates_applied_ += step.pushes.size();
  applied_minibatches_ += step.minibatches;
  ++steps_;
  if (last_step_ != absl::InfinitePast() && step.at > last_step_) {
    training_time_ += std::min(step.at - last_step_, kTrainingClockGap);
  }
  last_step_ = std::max(last_step_, step.at);
  rate_.Record(static_cast<int64_t>(step.pushes.size()));
}

absl::Status ApplyCounters::SaveTo(absl::Mutex&, CheckpointData& data) const {
  v1::CheckpointManifest& manifest = data.manifest;
  manifest.set_updates_applied(updates_applied_);
  manifest.set_applied_minibatches(applied_minibatches_);
  manifest.set_training_ms(absl::ToInt64Milliseconds(training_time_));
  for (const auto& [reason, count] : rejections_) {
    (*manifest.mutable_rejections())[v1::RejectReason_Name(reason)] += count;
  }
  return absl::OkStatus();
}

absl::Status ApplyCounters::Restore(absl::Mutex&, LoadedCheckpoint& checkpoint) {
  const v1::CheckpointManifest& manifest = checkpoint.manifest;
  updates_applied_ = manifest.updates_applied();
  applied_minibatches_ = manifest.applied_minibatches();
  training_time_ = absl::Milliseconds(manifest.training_ms());
  for (const auto& [name, count] : manifest.rejections()) {
    v1::RejectReason reason;
    if (v1::RejectReason_Parse(name, &reason)) rejections_[reason] = count;
  }
  return absl::OkStatus();
}

void ApplyCounters::AddTo(v1::StatusResponse& status, absl::Time now) const {
  status.set_updates_applied(updates_applied_);
  status.set_applied_minibatches(applied_minibatches_);
  status.set_repeated_pushes(repeated_pushes_);
  status.set_apply_steps(steps_);
  status.set_training_seconds(absl::ToDoubleSeconds(training_time_));
  for (const auto& [pushes, batches] : drained_)
    (*status.mutable_drained_batches())[pushes] = batches;
  for (const auto& [reason, count] : rejections_) {
    (*status.mutable_rejections())[v1::RejectReason_Name(reason)] += count;
  }
  status.set_pushes_per_second(rate_.PerSecond(now));
}

}  // namespace convoy::ps
