// CheckpointTrigger: when the periodic checkpoint is due, every checkpoint_every_updates applied
// updates (applied pushes) and/or every checkpoint_every, and the background task that writes it.
// It follows the applies as a part (server_part.h), so the apply does not know about checkpoints.
//
// Thread-safe. Its lock is never held while the checkpoint runs, and the server calls AfterApply
// with none of its own locks held: a checkpoint takes the server's writer lock, and Stop waits for
// a checkpoint in progress.
#ifndef CONVOY_PARAM_SERVER_CORE_CHECKPOINT_TRIGGER_H_
#define CONVOY_PARAM_SERVER_CORE_CHECKPOINT_TRIGGER_H_

#include <cstdint>
#include <functional>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/support/periodic_task.h"
#include "param_server/core/server_part.h"

namespace convoy::ps {

class CheckpointTrigger : public ServerPart {
 public:
  // every_updates: applied updates between periodic checkpoints, 0: off. every: time between them,
  // zero or less: off.
  CheckpointTrigger(uint64_t every_updates, absl::Duration every)
      : every_updates_(every_updates), every_(every) {}
  ~CheckpointTrigger() override { Stop(); }

  // Whether either trigger is on.
  bool enabled() const { return every_updates_ > 0 || every_ > absl::ZeroDuration(); }

  // Starts the task that calls `checkpoint` whenever a trigger is due, each measured from the
  // previous periodic checkpoint (the time from now). Updates applied before the start count:
  // enough of them make the first checkpoint due at once. Does nothing when both triggers are off
  // or the task runs already.
  void Start(std::function<void()> checkpoint) ABSL_LOCKS_EXCLUDED(mu_);
  // Stops the task after a checkpoint in progress. Must not be called holding a lock the
  // checkpoint takes. Idempotent.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

  // Counts the step's pushes and wakes the task once every_updates are due. Any checkpoint,
  // periodic or asked for, leaves the periodic schedule as it is.
  void AfterApply(const AppliedStep& step) override ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // In the task: whether a trigger is due now; if one is, both start counting again from now. A
  // wake that an earlier run already answered finds neither due.
  bool TakeDue() ABSL_LOCKS_EXCLUDED(mu_);
  bool DueByUpdates() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return every_updates_ > 0 && updates_since_checkpoint_ >= every_updates_;
  }

  const uint64_t every_updates_;
  const absl::Duration every_;
  absl::Mutex mu_;
  uint64_t updates_since_checkpoint_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time last_checkpoint_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<PeriodicTask> task_ ABSL_GUARDED_BY(mu_);
};

}  // namespace convoy::ps

#endif  // CONVOY_PARAM_SERVER_CORE_CHECKPOINT_TRIGGER_H_
