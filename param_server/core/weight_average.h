// WeightAverage: the averaged network (NETWORK_AVERAGE), an exponential moving average of the
// online weights over the run's applied minibatches.
//
// Each Fold() takes the newest published weights and the number of minibatches applied to reach
// them. The Δ minibatches since the previous fold get the weight
//     alpha = max(1 - (1 - 1/horizon)^Δ, Δ / (covered + Δ)),
//     average += alpha * (weights - average),
// where `covered` counts the minibatches folded so far: until the average has seen `horizon`
// minibatches it is their plain mean (the second term is larger), and from then on an exponential
// average whose weights fall by e every `horizon` minibatches, whatever the folds' spacing. The
// first fold after the start therefore replaces the initial weights outright.
//
// A policy's greedy actions turn on small differences of its action values (docs/benchmarks.md,
// "Why turns fail"), which the online weights trade back and forth from one minute to the next;
// the average of the weights keeps what they agree on.
//
// Thread-compatible: the parameter server serialises Fold and Restore, and hands out the immutable
// snapshots Fold publishes.
#ifndef CONVOY_PARAM_SERVER_CORE_WEIGHT_AVERAGE_H_
#define CONVOY_PARAM_SERVER_CORE_WEIGHT_AVERAGE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "convoy/v1/checkpoint.pb.h"
#include "param_server/core/checkpointer.h"
#include "param_server/core/weight_store.h"

namespace convoy::ps {

class WeightAverage {
 public:
  // `horizon` >= 1 minibatches. Starts as `initial` at `version`, having covered nothing, with
  // `applied_minibatches` applied so far.
  WeightAverage(uint64_t horizon, std::vector<float> initial, uint64_t version,
                uint64_t applied_minibatches);

  // Folds `weights`, reached after `applied_minibatches` minibatches in all, into the average.
  // Returns whether it changed anything: weights of the version already folded, or no minibatches
  // since, change nothing.
  bool Fold(const WeightSnapshot& weights, uint64_t applied_minibatches);

  // The average as of the version last folded (immutable; a new one after each fold that changed
  // it).
  std::shared_ptr<const WeightSnapshot> Snapshot() const { return published_; }

  // The minibatches folded in so far (capped nowhere), and the run's applied minibatches at the
  // fold.
  uint64_t covered() const { return covered_; }
  uint64_t minibatches_at_fold() const { return minibatches_at_fold_; }
  uint64_t horizon() const { return horizon_; }

  // Continues an average a checkpoint holds. Errors: INVALID_ARGUMENT when `values` is not the size
  // of this average.
  absl::Status Restore(std::vector<float> values, uint64_t version, uint64_t covered,
                       uint64_t minibatches_at_fold);
  // The same from a checkpoint: `values` are its averaged network, the manifest says what they
  // cover.
  absl::Status Restore(const v1::CheckpointManifest& manifest, std::vector<float> values);
  // Puts the published average and what it covers into a checkpoint.
  void SaveTo(CheckpointData& data) const;

  // The weight a fold of `delta` minibatches gets after `covered` were folded (the formula above).
  static double FoldWeight(uint64_t horizon, uint64_t covered, uint64_t delta);

 private:
  void Publish(uint64_t version);

  const uint64_t horizon_;
  // fp32, as checkpoints hold it, so a resumed average continues bit for bit. A fold moves each
  // weight by alpha times its change; a second's folds against a horizon of thousands of
  // minibatches make alpha about 1e-2, far above fp32's relative rounding of 6e-8.
  std::vector<float> average_;
  uint64_t version_ = 0;
  uint64_t covered_ = 0;
  uint64_t minibatches_at_fold_ = 0;
  std::shared_ptr<const WeightSnapshot> published_;
};

}  // namespace convoy::ps

#endif  // CONVOY_PARAM_SERVER_CORE_WEIGHT_AVERAGE_H_
