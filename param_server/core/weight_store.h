// WeightStore: the master weights as one flat fp32 buffer plus a version, read through immutable snapshots.
#ifndef CONVOY_PARAM_SERVER_CORE_WEIGHT_STORE_H_
#define CONVOY_PARAM_SERVER_CORE_WEIGHT_STORE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace convoy::ps {

// One published version of the weights. Never changes once published, so a reader may stream it while newer
// versions are applied: a pull never sees a mix of two versions.
struct WeightSnapshot {
  uint64_t version = 0;
  std::vector<float> values;
};

// Thread-safety: Snapshot() may be called from any thread at any time; it takes a short lock to copy a
// pointer and never waits for an apply. mutable_master() and Publish() belong to the single writer (the
// parameter server serialises applies), which edits the master buffer in place and then publishes it.
class WeightStore {
 public:
  // Starts at `version` with `initial` as the master weights, already published.
  WeightStore(std::vector<float> initial, uint64_t version);

  WeightStore(const WeightStore&) = delete;
  WeightStore& operator=(const WeightStore&) = delete;

  // The newest published snapshot.
  std::shared_ptr<const WeightSnapshot> Snapshot() const ABSL_LOCKS_EXCLUDED(mu_);

  // The writer's buffer. Its address never changes, so an optimizer may keep a view of it.
  float* mutable_master() { return master_.data(); }
  const float* master() const { return master_.data(); }
  size_t size() const { return master_.size(); }

  // Copies the master buffer into a snapshot stamped `version` and makes it the one readers get. Buffers no
  // reader holds any more are reused, so a steady state allocates nothing.
  void Publish(uint64_t version) ABSL_LOCKS_EXCLUDED(mu_);

  uint64_t version() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  std::vector<float> master_;
  // Snapshots the writer has made; an entry whose use_count() is 1 is held by nobody else and may be reused.
  // Only the writer touches the pool.
  std::vector<std::shared_ptr<WeightSnapshot>> pool_;
  mutable absl::Mutex mu_;
  std::shared_ptr<const WeightSnapshot> current_ ABSL_GUARDED_BY(mu_);
};

}  // namespace convoy::ps

#endif  // CONVOY_PARAM_SERVER_CORE_WEIGHT_STORE_H_
