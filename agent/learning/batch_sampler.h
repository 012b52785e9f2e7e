// BatchSampler: a background thread that samples minibatches from a ReplayMemory and stages them as
// tensors on the learner's device, so that the learner never waits on replay.
#ifndef CONVOY_AGENT_LEARNING_BATCH_SAMPLER_H_
#define CONVOY_AGENT_LEARNING_BATCH_SAMPLER_H_

#include <torch/types.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "agent/learning/replay_memory.h"

namespace convoy::agent {

// A minibatch on the learner's device.
struct TensorBatch {
  // uint8 [n, C, H, W] (the learner converts to float / 255).
  torch::Tensor observations, next_observations;
  torch::Tensor actions;                      // int64 [n]
  torch::Tensor returns, discounts, weights;  // float [n]
  std::vector<uint64_t> ids;                  // for ReplayMemory::UpdatePriorities
};

// Thread-safety: Next, Stop and the counters may be called from any thread. Batches are sampled and
// copied on the sampler's own thread. On CUDA the host tensors are pinned and the copies to the
// device are non-blocking, queued on that thread's current stream for the device (the default
// stream), so kernels the learner queues on the default stream run after the copies have landed; a
// learner on another stream must synchronise with it.
class BatchSampler {
 public:
  // Starts a background thread that keeps up to `prefetch` minibatches of `batch_size` ready,
  // sampled from `memory` (borrowed; it must outlive the sampler), assembled in (pinned, when
  // device is CUDA) host tensors and copied to `device` with non_blocking copies. Waits (without
  // spinning) while memory->size() < max(batch_size, min_size). batch_size and prefetch must be at
  // least 1 (checked).
  BatchSampler(ReplayMemory* memory, size_t batch_size, size_t min_size, torch::Device device,
               int prefetch = 2);
  ~BatchSampler();  // stops and joins the thread

  BatchSampler(const BatchSampler&) = delete;
  BatchSampler& operator=(const BatchSampler&) = delete;

  // Blocks until a minibatch is ready or `timeout` passes (DEADLINE_EXCEEDED) or Stop() was called
  // (CANCELLED). If sampling failed for a reason other than too small a memory, returns that error
  // once the batches made before it are taken.
  absl::StatusOr<TensorBatch> Next(absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_);
  // Stops the thread and waits for it (at most one poll interval of a memory wait, or one batch).
  // Idempotent.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

  uint64_t batches_produced() const ABSL_LOCKS_EXCLUDED(mu_);
  double learner_wait_seconds() const ABSL_LOCKS_EXCLUDED(mu_);  // total time Next() spent waiting
  // The sampler thread's CPU seconds as of its latest minibatch (sampling, assembling, copying).
  double cpu_seconds() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Run();
  TensorBatch Assemble(const ReplayBatch& batch) const;
  bool stopping() const ABSL_LOCKS_EXCLUDED(mu_);

  ReplayMemory* const memory_;
  const size_t batch_size_;
  const size_t min_size_;
  const torch::Device device_;
  const size_t prefetch_;

  mutable absl::Mutex mu_;
  std::deque<TensorBatch> ready_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  uint64_t produced_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Duration waited_ ABSL_GUARDED_BY(mu_);
  double cpu_seconds_ ABSL_GUARDED_BY(mu_) = 0;

  std::mutex join_mu_;  // serialises joins when Stop is called from several threads
  std::thread thread_;  // last: started once everything above is constructed
};

}  // namespace convoy::agent

#endif  // CONVOY_AGENT_LEARNING_BATCH_SAMPLER_H_
