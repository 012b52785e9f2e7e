// Admission: at most a fixed number of streams at work at once, the rest waiting their turn in
// arrival order, holding no thread. The service admits pushes (push_buffer_pool.h, one receive
// buffer each) and pulls this way, so that the data in flight, and with it the server's memory and
// the caches its copies go through, are bounded however many agents are connected: a waiting stream
// is not read from or written to, and HTTP/2's flow control holds its agent back.
//
// Thread-safe. Its lock is never held while running a waiter's callback or taking another lock.
#ifndef CONVOY_PARAM_SERVER_CORE_ADMISSION_H_
#define CONVOY_PARAM_SERVER_CORE_ADMISSION_H_

#include <cstddef>
#include <cstdint>
#include <deque>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"

namespace convoy::ps {

class Admission {
 public:
  // Runs once when a waiter is admitted, on the thread that released the slot.
  using Ready = absl::AnyInvocable<void() &&>;

  // `slots` >= 1 at work at once; at most `max_waiting` wait.
  Admission(size_t slots, size_t max_waiting);
  Admission(const Admission&) = delete;
  Admission& operator=(const Admission&) = delete;

  enum class Verdict {
    kNow,      // Admitted: the caller holds a slot until it calls Release().
    kWaiting,  // `ready` runs once a slot is handed over, unless CancelWait(id) wins.
    kRefused,  // Every slot is taken and max_waiting wait already; nothing will run.
  };
  struct Ticket {
    Verdict verdict = Verdict::kRefused;
    uint64_t id = 0;  // With kWaiting.
  };
  Ticket Acquire(Ready ready) ABSL_LOCKS_EXCLUDED(mu_);

  // Withdraws a wait. True: its `ready` will never run. False: it was already admitted (its `ready`
  // ran or is running), and the caller holds a slot.
  bool CancelWait(uint64_t id) ABSL_LOCKS_EXCLUDED(mu_);

  // Gives a slot back: to the longest waiter (its `ready` runs on this thread, after the lock is
  // released), or free.
  void Release() ABSL_LOCKS_EXCLUDED(mu_);

  size_t slots() const { return slots_; }
  size_t max_waiting() const { return max_waiting_; }
  size_t in_use() const ABSL_LOCKS_EXCLUDED(mu_);
  size_t waiting() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Waiter {
    uint64_t id;
    Ready ready;
  };

  const size_t slots_;
  const size_t max_waiting_;
  mutable absl::Mutex mu_;
  size_t in_use_ ABSL_GUARDED_BY(mu_) = 0;
  std::deque<Waiter> waiters_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace convoy::ps

#endif  // CONVOY_PARAM_SERVER_CORE_ADMISSION_H_
