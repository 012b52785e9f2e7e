// PushBufferPool: the model-sized buffers pushes are received into. There are a fixed number of
// them, so the server's memory for pushes is bounded (capacity x parameters x 4 bytes) however many
// agents are connected, and once each was used a steady state allocates nothing.
//
// A push that finds none free waits for one holding no thread: the gRPC service does not read its
// stream until a buffer is handed to it (HTTP/2's flow control holds the agent back meanwhile), and
// buffers go to the waiters in arrival order. Only when the waiters too reach their bound does the
// pool refuse: the service then answers RESOURCE_EXHAUSTED with a retry delay, which agents honour
// (docs/protocol.md, "A busy server").
//
// Thread-safe. Its lock is never held while running a waiter's callback or taking another lock.
#ifndef CONVOY_PARAM_SERVER_CORE_PUSH_BUFFER_POOL_H_
#define CONVOY_PARAM_SERVER_CORE_PUSH_BUFFER_POOL_H_

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"
#include "param_server/core/admission.h"

namespace convoy::ps {

class PushBufferPool {
 public:
  // Runs once with the buffer handed to a waiter.
  using Ready = absl::AnyInvocable<void(std::vector<float> buffer) &&>;

  // `capacity` >= 1 buffers of `elements` floats (allocated when first needed); at most
  // `max_waiting` pushes wait for one.
  PushBufferPool(size_t capacity, size_t elements, size_t max_waiting);
  PushBufferPool(const PushBufferPool&) = delete;
  PushBufferPool& operator=(const PushBufferPool&) = delete;

  // kNow: `buffer` is the caller's. kWaiting: `ready` will run with a buffer once one is
  // released, unless CancelWait(id) wins. kRefused: every buffer is in use and max_waiting pushes
  // wait already; nothing will run.
  struct Ticket {
    Admission::Verdict verdict = Admission::Verdict::kRefused;
    std::vector<float> buffer;  // With kNow.
    uint64_t id = 0;            // With kWaiting.
  };
  Ticket Acquire(Ready ready) ABSL_LOCKS_EXCLUDED(mu_);

  // Withdraws a wait. True: its `ready` will never run. False: a buffer was already handed to it
  // (its `ready` ran or is running), and the caller still owns that buffer once it arrives.
  bool CancelWait(uint64_t id) { return slots_.CancelWait(id); }

  // Gives a buffer back: to the longest waiter (its `ready` runs on this thread, after the pool's
  // lock is released), or to the pool.
  void Release(std::vector<float> buffer) ABSL_LOCKS_EXCLUDED(mu_);

  size_t capacity() const { return slots_.slots(); }
  size_t elements() const { return elements_; }
  // The bound on the pool's memory.
  size_t bytes() const { return capacity() * elements_ * sizeof(float); }
  size_t in_use() const { return slots_.in_use(); }
  size_t waiting() const { return slots_.waiting(); }

 private:
  // A free buffer, or a new one (the caller holds a slot, so there are never more than capacity).
  std::vector<float> TakeFree() ABSL_LOCKS_EXCLUDED(mu_);

  const size_t elements_;
  Admission slots_;  // One slot per buffer.
  absl::Mutex mu_;
  std::vector<std::vector<float>> free_ ABSL_GUARDED_BY(mu_);
};

}  // namespace convoy::ps

#endif  // CONVOY_PARAM_SERVER_CORE_PUSH_BUFFER_POOL_H_
