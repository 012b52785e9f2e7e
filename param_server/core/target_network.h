// TargetNetwork: the server's copy of the online weights that learners bootstrap from. It is taken
// again once update_frequency minibatches have been applied since the previous copy
// (TargetRefreshDue), and checkpoints and restores itself with the run. With a tau below 1 a copy
// is Polyak's soft one: the target moves that share of the way toward the online weights.
//
// A part of the server (server_part.h): Start, Restore and each step's refresh run under the
// server's writer lock. Snapshot and version may be called from any thread at any time: pulls,
// joins and Status read them under a short lock of their own that is never held while taking
// another, so they never wait for an apply.
#ifndef CONVOY_PARAM_SERVER_CORE_TARGET_NETWORK_H_
#define CONVOY_PARAM_SERVER_CORE_TARGET_NETWORK_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "param_server/core/checkpointer.h"
#include "param_server/core/server_part.h"
#include "param_server/core/weight_store.h"

namespace convoy::ps {

class TargetNetwork : public ServerPart {
 public:
  // update_frequency: applied minibatches between copies; at least 1. tau: the share of the way a
  // copy moves the target toward the online weights, in (0, 1]; 1 takes the online snapshot itself.
  explicit TargetNetwork(uint64_t update_frequency, double tau = 1.0)
      : update_frequency_(update_frequency), tau_(tau) {}

  // A fresh run: the target is the initial weights, taken at 0 minibatches and version 0.
  void Start(absl::Mutex& mu, std::shared_ptr<const WeightSnapshot> initial)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) ABSL_LOCKS_EXCLUDED(published_mu_);
  // A resumed run: the checkpoint's target weights and the minibatches and version they were taken
  // at.
  absl::Status Restore(absl::Mutex& mu, LoadedCheckpoint& checkpoint) override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) ABSL_LOCKS_EXCLUDED(published_mu_);
  // Puts the target and when it was taken into a checkpoint.
  absl::Status SaveTo(absl::Mutex& mu, CheckpointData& data) const override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) ABSL_LOCKS_EXCLUDED(published_mu_);

  // After a step: when a copy is due at the run's applied minibatches, takes the step's published
  // weights (tau 1) or moves the target tau of the way toward them.
  void Applied(absl::Mutex& mu, const AppliedStep& step) override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu)
      ABSL_LOCKS_EXCLUDED(published_mu_);

  std::shared_ptr<const WeightSnapshot> Snapshot() const ABSL_LOCKS_EXCLUDED(published_mu_);
  // The online version the target was last copied from or moved toward (0 until the first copy of
  // a fresh run).
  uint64_t version() const ABSL_LOCKS_EXCLUDED(published_mu_);

 private:
  void Publish(std::shared_ptr<const WeightSnapshot> weights, uint64_t version)
      ABSL_LOCKS_EXCLUDED(published_mu_);

  const uint64_t update_frequency_;
  const double tau_;
  // Written only under the server's writer lock (the methods above that require it).
  uint64_t minibatches_at_copy_ = 0;
  mutable absl::Mutex published_mu_;
  std::shared_ptr<const WeightSnapshot> weights_ ABSL_GUARDED_BY(published_mu_);
  uint64_t version_ ABSL_GUARDED_BY(published_mu_) = 0;
};

}  // namespace convoy::ps

#endif  // CONVOY_PARAM_SERVER_CORE_TARGET_NETWORK_H_
