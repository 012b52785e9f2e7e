#include "param_server/core/push_queue.h"

#include <algorithm>
#include <utility>

namespace convoy::ps {

bool PushQueue::Add(QueuedPush& push) {
  absl::MutexLock lock(&mu_);
  if (closed_) return false;
  pushes_.push_back(std::move(push));
  return true;
}

std::vector<QueuedPush> PushQueue::Take(size_t max) {
  absl::MutexLock lock(&mu_, absl::Condition(this, &PushQueue::Ready));
  std::vector<QueuedPush> batch;
  const size_t n = std::min(std::max<size_t>(max, 1), pushes_.size());
  batch.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    batch.push_back(std::move(pushes_.front()));
    pushes_.pop_front();
  }
  return batch;
}

void PushQueue::Close() {
  absl::MutexLock lock(&mu_);
  closed_ = true;
}

size_t PushQueue::size() const {
  absl::MutexLock lock(&mu_);
  return pushes_.size();
}

}  // namespace convoy::ps
