// PushQueue: pushes received whole and validated, waiting for the server's apply worker, as
// Reverb's table worker takes what its clients queued: a handler only appends under a short lock
// and goes on (it never waits for the optimizer), and the worker takes everything queued, up to a
// bound, as one batch for one optimizer step.
//
// Thread-safe. Its lock is a leaf: never held while taking another.
#ifndef CONVOY_PARAM_SERVER_CORE_PUSH_QUEUE_H_
#define CONVOY_PARAM_SERVER_CORE_PUSH_QUEUE_H_

#include <cstddef>
#include <deque>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"
#include "common/wire/push_answer.h"
#include "param_server/core/push_assembler.h"

namespace convoy::ps {

// Runs once, on the apply worker with none of the server's locks held, with the push's answer
// and its buffer back (to reuse).
using PushDone = absl::AnyInvocable<void(const PushAnswer& outcome, std::vector<float> buffer) &&>;

struct QueuedPush {
  PushHeader header;
  std::vector<float> values;  // Model-sized, complete.
  PushDone done;
};

class PushQueue {
 public:
  // False once Close() was called: the push is handed back, not queued.
  bool Add(QueuedPush& push) ABSL_LOCKS_EXCLUDED(mu_);

  // Waits until a push is queued or the queue is closed, then takes up to `max` pushes in arrival
  // order. Empty only once the queue is closed and drained.
  std::vector<QueuedPush> Take(size_t max) ABSL_LOCKS_EXCLUDED(mu_);

  // From now on Add refuses; Take hands out what is queued, then nothing.
  void Close() ABSL_LOCKS_EXCLUDED(mu_);

  size_t size() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  bool Ready() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return closed_ || !pushes_.empty(); }

  mutable absl::Mutex mu_;
  std::deque<QueuedPush> pushes_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace convoy::ps

#endif  // CONVOY_PARAM_SERVER_CORE_PUSH_QUEUE_H_
