#include "param_server/core/admission.h"

#include <algorithm>
#include <utility>

namespace convoy::ps {

Admission::Admission(size_t slots, size_t max_waiting)
    : slots_(std::max<size_t>(slots, 1)), max_waiting_(max_waiting) {}

Admission::Ticket Admission::Acquire(Ready ready) {
  Ticket ticket;
  absl::MutexLock lock(&mu_);
  if (in_use_ < slots_) {
    ++in_use_;
    ticket.verdict = Verdict::kNow;
    return ticket;
  }
  if (waiters_.size() >= max_waiting_) return ticket;  // kRefused.
  ticket.verdict = Verdict::kWaiting;
  ticket.id = next_id_++;
  waiters_.push_back(Waiter{ticket.id, std::move(ready)});
  return ticket;
}

bool Admission::CancelWait(uint64_t id) {
  Ready withdrawn;  // Destroyed after the lock is released: it may own what its caller owns.
  absl::MutexLock lock(&mu_);
  auto it = std::find_if(waiters_.begin(), waiters_.end(),
                         [id](const Waiter& waiter) { return waiter.id == id; });
  if (it == waiters_.end()) return false;
  withdrawn = std::move(it->ready);
  waiters_.erase(it);
  return true;
}

void Admission::Release() {
  Ready ready;
  {
    absl::MutexLock lock(&mu_);
    if (waiters_.empty()) {
      --in_use_;
      return;
    }
    // The slot passes to the longest waiter: in_use_ stays.
    ready = std::move(waiters_.front().ready);
    waiters_.pop_front();
  }
  std::move(ready)();
}

size_t Admission::in_use() const {
  absl::MutexLock lock(&mu_);
  return in_use_;
}

size_t Admission::waiting() const {
  absl::MutexLock lock(&mu_);
  return waiters_.size();
}

}  // namespace convoy::ps
