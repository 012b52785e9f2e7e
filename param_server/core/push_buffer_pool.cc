#include "param_server/core/push_buffer_pool.h"

namespace convoy::ps {

PushBufferPool::PushBufferPool(size_t capacity, size_t elements, size_t max_waiting)
    : elements_(elements), slots_(capacity, max_waiting) {}

std::vector<float> PushBufferPool::TakeFree() {
  {
    absl::MutexLock lock(&mu_);
    if (!free_.empty()) {
      std::vector<float> buffer = std::move(free_.back());
      free_.pop_back();
      return buffer;
    }
  }
  return std::vector<float>(elements_);  // Made outside the lock, once per slot.
}

PushBufferPool::Ticket PushBufferPool::Acquire(Ready ready) {
  const Admission::Ticket slot =
      slots_.Acquire([this, ready = std::move(ready)]() mutable { std::move(ready)(TakeFree()); });
  Ticket ticket;
  ticket.verdict = slot.verdict;
  ticket.id = slot.id;
  if (slot.verdict == Admission::Verdict::kNow) ticket.buffer = TakeFree();
  return ticket;
}

void PushBufferPool::Release(std::vector<float> buffer) {
  if (buffer.size() != elements_) buffer.resize(elements_);
  {
    absl::MutexLock lock(&mu_);
    free_.push_back(std::move(buffer));
  }
  slots_.Release();  // A waiter, if any, takes the buffer now.
}

}  // namespace convoy::ps
