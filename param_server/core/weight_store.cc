#include "param_server/core/weight_store.h"

#include <algorithm>
#include <atomic>
#include <utility>

namespace convoy::ps {
namespace {
// Enough buffers for the readers that are typically mid-stream; beyond this, snapshots are not pooled.
constexpr size_t kMaxPooledSnapshots = 8;
}  // namespace

WeightStore::WeightStore(std::vector<float> initial, uint64_t version)
    : master_(std::move(initial)) {
  Publish(version);
}

std::shared_ptr<const WeightSnapshot> WeightStore::Snapshot() const {
  absl::ReaderMutexLock lock(&mu_);
  return current_;
}

uint64_t WeightStore::version() const {
  absl::ReaderMutexLock lock(&mu_);
  return current_->version;
}

void WeightStore::Publish(uint64_t version) {
  std::shared_ptr<WeightSnapshot> next;
  for (const std::shared_ptr<WeightSnapshot>& candidate : pool_) {
    if (candidate.use_count() == 1) {  // Neither current_ nor any reader holds it.
      // Pairs with the release in the last reader's reference drop: its reads are done.
      std::atomic_thread_fence(std::memory_order_acquire);
      next = candidate;
      break;
    }
  }
  if (next == nullptr) {
    next = std::make_shared<WeightSnapshot>();
    next->values.resize(master_.size());
    if (pool_.size() < kMaxPooledSnapshots) pool_.push_back(next);
  }
  std::copy(master_.begin(), master_.end(), next->values.begin());
  next->version = version;
  std::shared_ptr<const WeightSnapshot> previous;
  {
    absl::MutexLock lock(&mu_);
    previous = std::exchange(current_, std::move(next));
  }
  // `previous` is released here, outside the lock.
}

}  // namespace convoy::ps
