// PeriodicTask: a callback run on a thread of its own every period, and at once when woken, for the
// background loops (checkpoint timer, stream watchdog) that would otherwise each poll a clock.
#ifndef CONVOY_COMMON_SUPPORT_PERIODIC_TASK_H_
#define CONVOY_COMMON_SUPPORT_PERIODIC_TASK_H_

#include <functional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace convoy {

// Runs `callback` on the task's own thread until stopped:
//
// - Schedule. The first run starts one period after construction; each later run one period after
//   the previous run ended (a fixed delay between runs, so a slow callback is never run back to
//   back by the schedule). With an infinite period the callback runs only when woken.
// - Wake() asks for a run now: it starts at once if the thread is waiting, or right after the run
//   in progress. Wakes that arrive before a run starts are coalesced into that one run. The
//   schedule goes on one period after the end of the woken run.
// - Order. Runs never overlap: they all happen on the one thread, one after the other.
// - Stop() wakes the thread at once, however long the period, waits for a run in progress to
//   finish (the callback is not interrupted; it may look at stop_requested()), and joins the
//   thread. Once Stop() has been called no further run starts, not even one asked for by Wake().
//   Idempotent; the destructor calls it.
// - An exception escaping the callback is logged as an error with the task's name, and the task
//   goes on with its schedule.
//
// Thread-safe. Wake() never waits for the callback, so it may be called while holding a lock the
// callback takes, and from the callback itself (asking for another run right after). Stop() waits
// for the callback: it must not be called while holding a lock the callback takes, nor from the
// callback (checked).
class PeriodicTask {
 public:
  // `name` appears in logs. `period` must be positive (checked); absl::InfiniteDuration() means
  // "only when woken".
  PeriodicTask(std::string name, absl::Duration period, std::function<void()> callback);
  ~PeriodicTask();

  PeriodicTask(const PeriodicTask&) = delete;
  PeriodicTask& operator=(const PeriodicTask&) = delete;

  // A run now, or right after the one in progress (see above).
  void Wake() ABSL_LOCKS_EXCLUDED(mu_);
  // Wakes, finishes the run in progress, joins; no run starts after (see above).
  void Stop() ABSL_LOCKS_EXCLUDED(mu_, join_mu_);

  // True once Stop() has been called: a long callback may return early.
  bool stop_requested() const ABSL_LOCKS_EXCLUDED(mu_);

  const std::string& name() const { return name_; }
  absl::Duration period() const { return period_; }

 private:
  void Loop() ABSL_LOCKS_EXCLUDED(mu_);
  void RunOnce();

  const std::string name_;
  const absl::Duration period_;
  const std::function<void()> callback_;

  mutable absl::Mutex mu_;
  bool woken_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;

  absl::Mutex join_mu_;  // Serialises joins when Stop is called from several threads.
  std::thread thread_ ABSL_GUARDED_BY(join_mu_);  // Started last, once everything above is set.
  std::thread::id thread_id_;                     // Set in the constructor, read only by Stop.
};

}  // namespace convoy

#endif  // CONVOY_COMMON_SUPPORT_PERIODIC_TASK_H_
