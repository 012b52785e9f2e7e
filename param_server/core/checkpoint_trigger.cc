#include "param_server/core/checkpoint_trigger.h"

#include <utility>

#include "absl/time/clock.h"

namespace convoy::ps {

void CheckpointTrigger::Start(std::function<void()> checkpoint) {
  if (!enabled()) return;
  absl::MutexLock lock(&mu_);
  if (task_ != nullptr) return;
  last_checkpoint_ = absl::Now();
  const absl::Duration period = every_ > absl::ZeroDuration() ? every_ : absl::InfiniteDuration();
  // The task runs when its period is up (one period after its previous run ended, so never before
  // the time is due) or when AfterApply woke it.
  task_ = std::make_unique<PeriodicTask>("checkpoint", period,
                                         [this, checkpoint = std::move(checkpoint)] {
                                           if (TakeDue()) checkpoint();
                                         });
  if (DueByUpdates()) task_->Wake();
}

void CheckpointTrigger::Stop() {
  std::unique_ptr<PeriodicTask> task;
  {
    absl::MutexLock lock(&mu_);
    task = std::move(task_);
  }
  // Outside mu_, which the task's callback takes: stopping waits for a checkpoint in progress.
  task.reset();
}

void CheckpointTrigger::AfterApply(const AppliedStep& step) {
  absl::MutexLock lock(&mu_);
  updates_since_checkpoint_ += step.pushes.size();
  if (task_ != nullptr && DueByUpdates()) task_->Wake();
}

bool CheckpointTrigger::TakeDue() {
  absl::MutexLock lock(&mu_);
  const absl::Time now = absl::Now();
  const bool by_time = every_ > absl::ZeroDuration() && now - last_checkpoint_ >= every_;
  if (!DueByUpdates() && !by_time) return false;
  updates_since_checkpoint_ = 0;
  last_checkpoint_ = now;
  return true;
}

}  // namespace convoy::ps
