// TargetNetwork: the server's copy of the online weights that learners bootstrap from. It is taken
// again once update_frequency minibatches have been applied since the previous copy
// (TargetRefreshDue), and checkpoints and restores itself with the run.
//
// Thread-safe: the single writer refreshes it after an apply; pulls, joins and Status read it at
// any time without waiting for an apply.
#ifndef CONVOY_PARAM_SERVER_TARGET_NETWORK_H_
#define CONVOY_PARAM_SERVER_TARGET_NETWORK_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "convoy/v1/checkpoint.pb.h"
#include "param_server/checkpointer.h"
#include "param_server/weight_store.h"

namespace convoy {

class TargetNetwork {
 public:
  // update_frequency: applied minibatches between copies; at least 1.
  explicit TargetNetwork(uint64_t update_frequency) : update_frequency_(update_frequency) {}

  // A fresh run: the target is the initial weights, taken at 0 minibatches and version 0.
  void Start(std::shared_ptr<const WeightSnapshot> initial) ABSL_LOCKS_EXCLUDED(mu_);
  // A resumed run: the checkpoint's target weights and the minibatches and version they were taken
  // at.
  void Restore(const v1::CheckpointManifest& manifest, std::vector<float> values)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Puts the target and when it was taken into a checkpoint.
  void SaveTo(CheckpointData& data) const ABSL_LOCKS_EXCLUDED(mu_);

  // After an apply: copies `online`'s newest snapshot when a copy is due at `applied_minibatches`.
  // Returns whether it did.
  bool OnApplied(uint64_t applied_minibatches, const WeightStore& online) ABSL_LOCKS_EXCLUDED(mu_);

  std::shared_ptr<const WeightSnapshot> Snapshot() const ABSL_LOCKS_EXCLUDED(mu_);
  // The online version the target was copied from (0 until the first copy of a fresh run).
  uint64_t version() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const uint64_t update_frequency_;
  mutable absl::Mutex mu_;
  std::shared_ptr<const WeightSnapshot> weights_ ABSL_GUARDED_BY(mu_);
  uint64_t version_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t minibatches_at_copy_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace convoy

#endif  // CONVOY_PARAM_SERVER_TARGET_NETWORK_H_
