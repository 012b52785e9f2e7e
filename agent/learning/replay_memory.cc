#include "agent/learning/replay_memory.h"

#include <glog/logging.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"

namespace convoy {
namespace {

// Frames are allocated this many at a time as the ring first fills, so a small run does not pay for
// a large capacity and no Add allocates more than once per chunk.
constexpr size_t kFramesPerChunk = 64;
constexpr int kMaxFrameStack = 256;

bool IsFinite(double x) { return std::isfinite(x); }

}  // namespace

absl::StatusOr<std::unique_ptr<ReplayMemory>> ReplayMemory::Create(const ReplayOptions& options) {
  auto invalid = [](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat("ReplayOptions: ", parts...));
  };
  for (int d : options.frame_shape) {
    if (d <= 0) {
      return invalid("frame_shape must be positive {C, H, W}, got {", options.frame_shape[0], ", ",
                     options.frame_shape[1], ", ", options.frame_shape[2], "}");
    }
  }
  if (options.frame_stack < 1 || options.frame_stack > kMaxFrameStack) {
    return invalid("frame_stack must be in [1, ", kMaxFrameStack, "], got ", options.frame_stack);
  }
  if (options.n_step < 1) return invalid("n_step must be at least 1, got ", options.n_step);
  if (options.capacity < 1) return invalid("capacity must be at least 1");
  if (!IsFinite(options.gamma) || options.gamma < 0.0 || options.gamma > 1.0) {
    return invalid("gamma must be in [0, 1], got ", options.gamma);
  }
  if (options.prioritized) {
    if (!IsFinite(options.alpha) || options.alpha < 0.0) {
      return invalid("alpha must be >= 0, got ", options.alpha);
    }
    if (!IsFinite(options.beta_start) || options.beta_start < 0.0 || options.beta_start > 1.0 ||
        !IsFinite(options.beta_end) || options.beta_end < 0.0 || options.beta_end > 1.0) {
      return invalid("beta_start and beta_end must be in [0, 1], got ", options.beta_start, " and ",
                     options.beta_end);
    }
    if (!IsFinite(options.priority_epsilon) || options.priority_epsilon <= 0.0) {
      return invalid("priority_epsilon must be > 0, got ", options.priority_epsilon);
    }
  }
  return std::unique_ptr<ReplayMemory>(new ReplayMemory(options));
}

ReplayMemory::ReplayMemory(const ReplayOptions& options)
    : options_(options),
      frame_bytes_(static_cast<size_t>(options.frame_shape[0]) * options.frame_shape[1] *
                   options.frame_shape[2]),
      frame_slots_(options.capacity + options.frame_stack + options.n_step),
      transition_slots_(options.capacity + options.n_step),
      rng_(options.seed) {
  absl::MutexLock lock(&mu_);
  chunks_.resize((frame_slots_ + kFramesPerChunk - 1) / kFramesPerChunk);
  frame_depth_.assign(frame_slots_, 0);
  obs_frame_.assign(transition_slots_, 0);
  action_.assign(transition_slots_, 0);
  reward_.assign(transition_slots_, 0.0f);
  terminal_.assign(transition_slots_, 0);
  if (options.prioritized) tree_ = std::make_unique<SumTree>(transition_slots_);
}

uint8_t* ReplayMemory::FrameData(uint64_t frame) const {
  const size_t slot = frame % frame_slots_;
  return chunks_[slot / kFramesPerChunk].get() + (slot % kFramesPerChunk) * frame_bytes_;
}

uint64_t ReplayMemory::PushFrame(const uint8_t* frame, bool episode_start) {
  const uint64_t number = next_frame_;
  const uint64_t fs = options_.frame_stack;
  // The write overwrites frame (number - frame_slots_). A transition whose observation is frame o
  // reads frames from o - (frame_stack - 1) on, so each transition with
  // o + frame_slots_ < number + frame_stack goes first.
  while (oldest_id_ < next_id_ &&
         obs_frame_[oldest_id_ % transition_slots_] + frame_slots_ < number + fs) {
    CHECK_LT(oldest_id_, SampleableEnd()) << "frame ring too small for the n-step window";
    DropOldest();
  }
  const size_t slot = number % frame_slots_;
  std::unique_ptr<uint8_t[]>& chunk = chunks_[slot / kFramesPerChunk];
  if (chunk == nullptr) {
    const size_t frames =
        std::min(kFramesPerChunk, frame_slots_ - (slot / kFramesPerChunk) * kFramesPerChunk);
    chunk.reset(new uint8_t[frames * frame_bytes_]);
    ++allocated_chunks_;
  }
  std::memcpy(FrameData(number), frame, frame_bytes_);
  uint16_t depth = 0;
  if (!episode_start) {
    depth = std::min<uint16_t>(frame_depth_[(number - 1) % frame_slots_] + 1,
                               static_cast<uint16_t>(options_.frame_stack - 1));
  }
  frame_depth_[slot] = depth;
  ++next_frame_;
  return number;
}

void ReplayMemory::DropOldest() {
  if (tree_ != nullptr) tree_->Set(oldest_id_ % transition_slots_, 0.0);
  ++oldest_id_;
}

void ReplayMemory::ReleaseOldestPending() {
  const uint64_t id = next_id_ - pending_;
  --pending_;
  if (tree_ != nullptr) tree_->Set(id % transition_slots_, max_priority_);
  if (SampleableEnd() - oldest_id_ > options_.capacity) DropOldest();
}

void ReplayMemory::StartEpisode(const uint8_t* first_frame) {
  absl::MutexLock lock(&mu_);
  // An episode still running is cut here (a time limit): its held-back windows are now complete.
  while (pending_ > 0) ReleaseOldestPending();
  PushFrame(first_frame, /*episode_start=*/true);
  in_episode_ = true;
}

void ReplayMemory::Add(int action, float reward, bool terminal, const uint8_t* next_frame) {
  absl::MutexLock lock(&mu_);
  CHECK(in_episode_)
      << "ReplayMemory::Add needs StartEpisode first (and again after a terminal Add)";
  // At most capacity sampleable and n_step - 1 held-back transitions are held, so the slot is free.
  DCHECK_LT(next_id_ - oldest_id_, transition_slots_);
  const uint64_t next_frame_number = PushFrame(next_frame, /*episode_start=*/false);
  const size_t slot = next_id_ % transition_slots_;
  obs_frame_[slot] = next_frame_number - 1;
  action_[slot] = action;
  reward_[slot] = reward;
  terminal_[slot] = terminal ? 1 : 0;
  ++next_id_;
  ++pending_;
  if (terminal) {
    while (pending_ > 0) ReleaseOldestPending();
    in_episode_ = false;
  } else {
    while (pending_ > static_cast<uint64_t>(options_.n_step - 1)) ReleaseOldestPending();
  }
}

void ReplayMemory::CopyStack(uint64_t frame, uint8_t* out) const {
  const int fs = options_.frame_stack;
  const uint64_t depth = frame_depth_[frame % frame_slots_];
  for (int i = 0; i < fs; ++i) {
    const uint64_t back = std::min<uint64_t>(fs - 1 - i, depth);
    std::memcpy(out + i * frame_bytes_, FrameData(frame - back), frame_bytes_);
  }
}

void ReplayMemory::CurrentObservation(uint8_t* out) const {
  absl::MutexLock lock(&mu_);
  CHECK_GT(next_frame_, 0u) << "ReplayMemory::CurrentObservation needs StartEpisode first";
  CopyStack(next_frame_ - 1, out);
}

double ReplayMemory::BetaLocked() const {
  if (options_.beta_anneal_samples == 0) return options_.beta_end;
  const double progress = std::min(
      1.0, static_cast<double>(sampled_) / static_cast<double>(options_.beta_anneal_samples));
  return options_.beta_start + (options_.beta_end - options_.beta_start) * progress;
}

absl::Status ReplayMemory::Sample(size_t n, ReplayBatch* batch) {
  const size_t obs_bytes = observation_bytes();
  // Resized outside the lock: a reused batch does not allocate, a new one does not stall Add.
  batch->size = n;
  batch->observations.resize(n * obs_bytes);
  batch->next_observations.resize(n * obs_bytes);
  batch->actions.resize(n);
  batch->returns.resize(n);
  batch->discounts.resize(n);
  batch->weights.resize(n);
  batch->ids.resize(n);

  absl::MutexLock lock(&mu_);
  const uint64_t end = SampleableEnd();
  const uint64_t held = end - oldest_id_;
  if (held < n) {
    batch->size = 0;
    return absl::FailedPreconditionError(absl::StrCat(
        "replay memory holds ", held, " sampleable transitions, fewer than the ", n, " asked for"));
  }
  if (n == 0) return absl::OkStatus();

  const size_t slots = transition_slots_;
  if (tree_ == nullptr) {
    std::uniform_int_distribution<uint64_t> pick(0, held - 1);
    for (size_t i = 0; i < n; ++i) {
      batch->ids[i] = oldest_id_ + pick(rng_);
      batch->weights[i] = 1.0f;
    }
  } else {
    const double total = tree_->Total();
    const double segment = total / static_cast<double>(n);
    const double beta = BetaLocked();
    const uint64_t oldest_slot = oldest_id_ % slots;
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    double max_weight = 0.0;
    for (size_t i = 0; i < n; ++i) {
      const size_t slot = tree_->Find((static_cast<double>(i) + unit(rng_)) * segment);
      const uint64_t id = oldest_id_ + (slot + slots - oldest_slot) % slots;
      DCHECK_LT(id, end);
      const double probability = tree_->Get(slot) / total;
      const double weight = std::pow(static_cast<double>(held) * probability, -beta);
      batch->ids[i] = id;
      batch->weights[i] = static_cast<float>(weight);
      max_weight = std::max(max_weight, weight);
    }
    for (size_t i = 0; i < n; ++i) {
      batch->weights[i] = static_cast<float>(batch->weights[i] / max_weight);
    }
    sampled_ += n;
  }

  const double gamma = options_.gamma;
  for (size_t i = 0; i < n; ++i) {
    const uint64_t id = batch->ids[i];
    const uint64_t obs = obs_frame_[id % slots];
    double ret = 0.0;
    double discount = 1.0;
    bool terminal = false;
    uint64_t steps = 0;
    for (uint64_t j = 0; j < static_cast<uint64_t>(options_.n_step); ++j) {
      const uint64_t t = id + j;
      // The window ends where the episode was cut: no later transition, or one of a new episode.
      if (j > 0 && (t >= next_id_ || obs_frame_[t % slots] != obs + j)) break;
      ret += discount * reward_[t % slots];
      discount *= gamma;
      steps = j + 1;
      if (terminal_[t % slots]) {
        terminal = true;
        break;
      }
    }
    batch->actions[i] = action_[id % slots];
    batch->returns[i] = static_cast<float>(ret);
    batch->discounts[i] = terminal ? 0.0f : static_cast<float>(discount);
    CopyStack(obs, batch->observations.data() + i * obs_bytes);
    CopyStack(obs + steps, batch->next_observations.data() + i * obs_bytes);
  }
  return absl::OkStatus();
}

void ReplayMemory::UpdatePriorities(const uint64_t* ids, const float* td_errors, size_t n) {
  if (!options_.prioritized) return;
  absl::MutexLock lock(&mu_);
  const uint64_t end = SampleableEnd();
  for (size_t i = 0; i < n; ++i) {
    if (ids[i] < oldest_id_ || ids[i] >= end || !std::isfinite(td_errors[i])) continue;
    // Kept above 0 so that the transition stays sampleable whatever alpha and epsilon give.
    const double priority =
        std::max(std::pow(std::abs(static_cast<double>(td_errors[i])) + options_.priority_epsilon,
                          options_.alpha),
                 std::numeric_limits<double>::min());
    tree_->Set(ids[i] % transition_slots_, priority);
    max_priority_ = std::max(max_priority_, priority);
  }
}

bool ReplayMemory::WaitForSize(size_t n, absl::Duration timeout) const {
  auto reached = [this, n]()
                     ABSL_NO_THREAD_SAFETY_ANALYSIS { return SampleableEnd() - oldest_id_ >= n; };
  const bool ok = mu_.LockWhenWithTimeout(absl::Condition(&reached), timeout);
  mu_.Unlock();
  return ok;
}

size_t ReplayMemory::size() const {
  absl::MutexLock lock(&mu_);
  return SampleableEnd() - oldest_id_;
}

double ReplayMemory::beta() const {
  absl::MutexLock lock(&mu_);
  return BetaLocked();
}

size_t ReplayMemory::bytes_per_transition() const {
  const size_t capacity = options_.capacity;
  size_t total =
      frame_slots_ * (frame_bytes_ + sizeof(uint16_t)) +
      transition_slots_ * (sizeof(uint64_t) + sizeof(int32_t) + sizeof(float) + sizeof(uint8_t));
  if (options_.prioritized) {
    size_t leaves = 1;
    while (leaves < transition_slots_) leaves *= 2;
    total += 2 * leaves * sizeof(double);
  }
  return (total + capacity - 1) / capacity;
}

size_t ReplayMemory::memory_bytes() const {
  absl::MutexLock lock(&mu_);
  size_t frames = allocated_chunks_ * kFramesPerChunk * frame_bytes_;
  const size_t last = chunks_.size() - 1;
  if (chunks_[last] != nullptr) {
    // The last chunk holds only the frames left over.
    frames -= (chunks_.size() * kFramesPerChunk - frame_slots_) * frame_bytes_;
  }
  size_t total = frames + frame_depth_.capacity() * sizeof(uint16_t) +
                 obs_frame_.capacity() * sizeof(uint64_t) + action_.capacity() * sizeof(int32_t) +
                 reward_.capacity() * sizeof(float) + terminal_.capacity() * sizeof(uint8_t);
  if (tree_ != nullptr) total += tree_->memory_bytes();
  return total;
}

}  // namespace convoy
