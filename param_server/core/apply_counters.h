// ApplyCounters: what the server's optimizer steps did, as a part of the server (server_part.h):
// pushes applied and their minibatches (checkpointed, so a resumed run counts on), the steps taken
// and how many pushes each drained batch held, the pushes decided against by policy (checkpointed
// with the rest of the rejections), repeats, the rate of applied pushes, and the run's training
// clock (checkpointed): the wall-clock time between its applied steps, each gap counted up to
// kTrainingClockGap, so that a pause (no agent pushing, a server restarting) does not count as
// training. The learning rate's fall over minutes runs on it.
//
// Not thread-safe: the server holds it under its writer lock (ABSL_GUARDED_BY), and its parts'
// calls require that lock.
#ifndef CONVOY_PARAM_SERVER_CORE_APPLY_COUNTERS_H_
#define CONVOY_PARAM_SERVER_CORE_APPLY_COUNTERS_H_

#include <cstdint>
#include <map>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/support/rates.h"
#include "convoy/v1/parameter_server.pb.h"
#include "param_server/core/server_part.h"

namespace convoy::ps {

class ApplyCounters : public ServerPart {
 public:
  // The push rate is measured over `rate_window`, from `start`.
  ApplyCounters(absl::Duration rate_window, absl::Time start) : rate_(rate_window, start) {}

  void Applied(absl::Mutex& mu, const AppliedStep& step) override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // The updates, minibatches and rejections; the other counts are this process's.
  absl::Status SaveTo(absl::Mutex& mu, CheckpointData& data) const override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  absl::Status Restore(absl::Mutex& mu, LoadedCheckpoint& checkpoint) override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  // One batch of `pushes` was drained and decided (applied, refused or answered again).
  void Drained(uint32_t pushes) { ++drained_[pushes]; }
  // A push refused by policy (staleness, lineage, a late repeat).
  void Rejected(v1::RejectReason reason) { ++rejections_[reason]; }
  void Repeated() { ++repeated_pushes_; }

  uint64_t applied_minibatches() const { return applied_minibatches_; }
  uint64_t updates_applied() const { return updates_applied_; }
  // The training clock as of the last applied step.
  absl::Duration training_time() const { return training_time_; }
  // The longest gap between two applied steps the training clock counts whole.
  static constexpr absl::Duration kTrainingClockGap = absl::Seconds(5);

  // Fills the counts into `status` (pushes per second as of `now`, which must not go backwards).
  void AddTo(v1::StatusResponse& status, absl::Time now) const;

 private:
  uint64_t updates_applied_ = 0;
  uint64_t applied_minibatches_ = 0;
  uint64_t steps_ = 0;
  uint64_t repeated_pushes_ = 0;
  absl::Duration training_time_;
  absl::Time last_step_ = absl::InfinitePast();  // This start's last applied step.
  std::map<uint32_t, uint64_t> drained_;         // Pushes in a drained batch -> batches.
  std::map<v1::RejectReason, uint64_t> rejections_;
  // Applied pushes; mutable because reading the rate drops the events that left its window.
  mutable RateMeter rate_;
};

}  // namespace convoy::ps

#endif  // CONVOY_PARAM_SERVER_CORE_APPLY_COUNTERS_H_
