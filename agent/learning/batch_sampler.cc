#include "agent/learning/batch_sampler.h"

#include <glog/logging.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/model/torch_compat.h"  // After LibTorch: glog's LOG.
#include "common/support/time_split.h"

namespace convoy::agent {
namespace {

// How often a sampler waiting for the memory to fill looks at its stop flag. The wait itself sleeps
// on the memory's mutex condition, so this only bounds how long Stop() takes.
constexpr absl::Duration kStopPollInterval = absl::Milliseconds(20);

torch::Tensor HostTensor(torch::IntArrayRef shape, torch::ScalarType dtype, bool pinned,
                         const void* data, size_t bytes) {
  torch::Tensor tensor =
      torch::empty(shape, torch::TensorOptions().dtype(dtype).pinned_memory(pinned));
  CHECK_EQ(static_cast<size_t>(tensor.nbytes()), bytes);
  if (bytes > 0) std::memcpy(tensor.data_ptr(), data, bytes);
  return tensor;
}

}  // namespace

BatchSampler::BatchSampler(ReplayMemory* memory, size_t batch_size, size_t min_size,
                           torch::Device device, int prefetch)
    : memory_(memory),
      batch_size_(batch_size),
      min_size_(min_size),
      device_(device),
      prefetch_(static_cast<size_t>(std::max(prefetch, 1))) {
  CHECK(memory_ != nullptr);
  CHECK_GE(batch_size_, 1u);
  CHECK_GE(prefetch, 1);
  thread_ = std::thread([this] { Run(); });
}

BatchSampler::~BatchSampler() { Stop(); }

void BatchSampler::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  std::lock_guard<std::mutex> join_lock(join_mu_);
  if (thread_.joinable()) thread_.join();
}

bool BatchSampler::stopping() const {
  absl::MutexLock lock(&mu_);
  return stopping_;
}

void BatchSampler::Run() {
  const size_t needed = std::max(batch_size_, min_size_);
  ReplayBatch host;  // reused: after the first batch, sampling allocates nothing on the host side
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      auto room = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return stopping_ || ready_.size() < prefetch_;
      };
      mu_.Await(absl::Condition(&room));
      if (stopping_) return;
    }
    while (!memory_->WaitForSize(needed, kStopPollInterval)) {
      if (stopping()) return;
    }
    absl::Status status = memory_->Sample(batch_size_, &host);
    // The memory can shrink between the wait and the sample (a transition dropped for frame space):
    // wait again.
    if (absl::IsFailedPrecondition(status)) continue;
    TensorBatch batch;
    if (status.ok()) {
      try {
        batch = Assemble(host);
      } catch (const std::exception& e) {
        status = absl::InternalError(absl::StrCat("assembling a replay minibatch: ", e.what()));
      }
    }
    absl::MutexLock lock(&mu_);
    if (!status.ok()) {
      LOG(ERROR) << "BatchSampler stops: " << status;
      error_ = status;
      return;
    }
    ready_.push_back(std::move(batch));
    ++produced_;
    cpu_seconds_ = ThreadCpuSeconds();
  }
}

TensorBatch BatchSampler::Assemble(const ReplayBatch& batch) const {
  const ReplayOptions& options = memory_->options();
  const int64_t n = static_cast<int64_t>(batch.size);
  const std::vector<int64_t> obs_shape = {n, int64_t{options.frame_shape[0]} * options.frame_stack,
                                          options.frame_shape[1], options.frame_shape[2]};
  const bool pinned = device_.is_cuda();
  TensorBatch host;
  host.observations = HostTensor(obs_shape, torch::kUInt8, pinned, batch.observations.data(),
                                 batch.observations.size());
  host.next_observations =
      HostTensor(obs_shape, torch::kUInt8, pinned, batch.next_observations.data(),
                 batch.next_observations.size());
  host.actions = HostTensor({n}, torch::kInt64, pinned, batch.actions.data(),
                            batch.actions.size() * sizeof(int64_t));
  host.returns = HostTensor({n}, torch::kFloat32, pinned, batch.returns.data(),
                            batch.returns.size() * sizeof(float));
  host.discounts = HostTensor({n}, torch::kFloat32, pinned, batch.discounts.data(),
                              batch.discounts.size() * sizeof(float));
  host.weights = HostTensor({n}, torch::kFloat32, pinned, batch.weights.data(),
                            batch.weights.size() * sizeof(float));
  host.ids = batch.ids;
  if (device_.is_cpu()) return host;

  // Pinned source memory stays reserved by LibTorch's host allocator until the copy that reads it
  // completes, so the host tensors may be dropped right after queuing the copies.
  TensorBatch out;
  out.observations = host.observations.to(device_, /*non_blocking=*/true);
  out.next_observations = host.next_observations.to(device_, /*non_blocking=*/true);
  out.actions = host.actions.to(device_, /*non_blocking=*/true);
  out.returns = host.returns.to(device_, /*non_blocking=*/true);
  out.discounts = host.discounts.to(device_, /*non_blocking=*/true);
  out.weights = host.weights.to(device_, /*non_blocking=*/true);
  out.ids = std::move(host.ids);
  return out;
}

absl::StatusOr<TensorBatch> BatchSampler::Next(absl::Duration timeout) {
  const absl::Time start = absl::Now();
  auto ready = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return stopping_ || !ready_.empty() || !error_.ok();
  };
  mu_.LockWhenWithTimeout(absl::Condition(&ready), timeout);
  waited_ += absl::Now() - start;
  absl::StatusOr<TensorBatch> result = absl::DeadlineExceededError("");
  if (stopping_) {
    result = absl::CancelledError("the batch sampler was stopped");
  } else if (!ready_.empty()) {
    result = std::move(ready_.front());
    ready_.pop_front();
  } else if (!error_.ok()) {
    result = error_;
  }
  mu_.Unlock();
  if (absl::IsDeadlineExceeded(result.status())) {
    // Built after unlocking: the memory's lock is never taken while holding ours.
    result = absl::DeadlineExceededError(absl::StrCat(
        "no replay minibatch within ", absl::FormatDuration(timeout), " (memory holds ",
        memory_->size(), " sampleable transitions, needs ", std::max(batch_size_, min_size_), ")"));
  }
  return result;
}

uint64_t BatchSampler::batches_produced() const {
  absl::MutexLock lock(&mu_);
  return produced_;
}

double BatchSampler::cpu_seconds() const {
  absl::MutexLock lock(&mu_);
  return cpu_seconds_;
}

double BatchSampler::learner_wait_seconds() const {
  absl::MutexLock lock(&mu_);
  return absl::ToDoubleSeconds(waited_);
}

}  // namespace convoy::agent
