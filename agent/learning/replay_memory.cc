#include "agent/learning/replay_memory.h"

#include <glog/logging.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <sstream>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "common/support/status_macros.h"

namespace convoy::agent {
namespace {

// Frames are allocated this many at a time as the ring first fills, so a small run does not pay for
// a large capacity and no Add allocates more than once per chunk.
constexpr size_t kFramesPerChunk = 64;
constexpr int kMaxFrameStack = 256;

bool IsFinite(double x) { return std::isfinite(x); }

// The mt19937_64 state is 312 decimal numbers; anything much longer is not one.
constexpr size_t kMaxRngTextBytes = 1 << 16;
// A save copies frames under the mutex this many bytes at a time (at least one frame).
constexpr size_t kSavePieceBytes = size_t{4} << 20;
// Transitions and depths are encoded this many at a time.
constexpr size_t kRecordsPerBatch = 4096;

// Little-endian encoding and decoding.
void PutLe(uint64_t value, int bytes, std::string* out) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>(value >> (8 * i)));
}
void PutU8(uint8_t v, std::string* out) { PutLe(v, 1, out); }
void PutU16(uint16_t v, std::string* out) { PutLe(v, 2, out); }
void PutU64(uint64_t v, std::string* out) { PutLe(v, 8, out); }
void PutI32(int32_t v, std::string* out) { PutLe(static_cast<uint32_t>(v), 4, out); }
void PutF32(float v, std::string* out) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  PutLe(bits, 4, out);
}
void PutF64(double v, std::string* out) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  PutLe(bits, 8, out);
}

// Reads fields in order from a buffer the caller has checked is long enough.
class Decoder {
 public:
  explicit Decoder(const uint8_t* data) : p_(data) {}
  uint8_t U8() { return static_cast<uint8_t>(Le(1)); }
  uint16_t U16() { return static_cast<uint16_t>(Le(2)); }
  uint32_t U32() { return static_cast<uint32_t>(Le(4)); }
  uint64_t U64() { return Le(8); }
  int32_t I32() { return static_cast<int32_t>(U32()); }
  float F32() {
    const uint32_t bits = U32();
    float v;
    std::memcpy(&v, &bits, sizeof(v));
    return v;
  }
  double F64() {
    const uint64_t bits = U64();
    double v;
    std::memcpy(&v, &bits, sizeof(v));
    return v;
  }

 private:
  uint64_t Le(int bytes) {
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v |= uint64_t{p_[i]} << (8 * i);
    p_ += bytes;
    return v;
  }
  const uint8_t* p_;
};

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
  EnsureChunk(slot);
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
  mu_.Await(absl::Condition(this, &ReplayMemory::NextFrameWritable));  // a save may need it
  // An episode still running is cut here (a time limit): its held-back windows are now complete.
  while (pending_ > 0) ReleaseOldestPending();
  PushFrame(first_frame, /*episode_start=*/true);
  in_episode_ = true;
}

void ReplayMemory::Add(int action, float reward, bool terminal, const uint8_t* next_frame) {
  absl::MutexLock lock(&mu_);
  CHECK(in_episode_)
      << "ReplayMemory::Add needs StartEpisode first (and again after a terminal Add)";
  mu_.Await(absl::Condition(this, &ReplayMemory::NextFrameWritable));  // a save may need it
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

void ReplayMemory::EnsureChunk(size_t slot) {
  std::unique_ptr<uint8_t[]>& chunk = chunks_[slot / kFramesPerChunk];
  if (chunk != nullptr) return;
  const size_t frames =
      std::min(kFramesPerChunk, frame_slots_ - (slot / kFramesPerChunk) * kFramesPerChunk);
  chunk.reset(new uint8_t[frames * frame_bytes_]);
  ++allocated_chunks_;
}

void ReplayMemory::CopyFrames(uint64_t first, size_t count, uint8_t* out) const {
  for (size_t i = 0; i < count; ++i) {
    std::memcpy(out + i * frame_bytes_, FrameData(first + i), frame_bytes_);
  }
}

// What Save copies under the mutex, to write outside it.
struct ReplayMemory::SaveSnapshot {
  ReplayMemoryState state;
  std::vector<uint16_t> depths;  // Per frame in [first_frame, next_frame).
  std::vector<uint64_t> obs_frames;
  std::vector<int32_t> actions;
  std::vector<float> rewards;
  std::vector<uint8_t> terminals;
  std::vector<double> priorities;  // Prioritized replay only.
  size_t piece_frames = 0;         // Frames copied at a time.
  std::vector<uint8_t> piece;      // The frames copied and not yet written.
  size_t in_piece = 0;
  uint64_t copied = 0;  // Frames before this one are in `piece` or written.
};

absl::Status ReplayMemory::Save(ReplaySaveSink* sink, absl::Notification* snapshot_taken) const {
  // A save that fails before its snapshot must not leave its caller waiting.
  const auto notify = absl::MakeCleanup([snapshot_taken]() {
    if (snapshot_taken != nullptr && !snapshot_taken->HasBeenNotified()) snapshot_taken->Notify();
  });
  absl::MutexLock save_lock(&save_mu_);
  SaveSnapshot snapshot;
  snapshot.piece_frames =
      std::min(frame_slots_, std::max<size_t>(1, kSavePieceBytes / frame_bytes_));
  snapshot.piece.resize(snapshot.piece_frames * frame_bytes_);
  {
    absl::MutexLock lock(&mu_);
    TakeSnapshot(&snapshot);
  }
  if (snapshot_taken != nullptr) snapshot_taken->Notify();
  // However this save ends, the writes must not stay held back.
  const auto release_floor = absl::MakeCleanup([this]() {
    absl::MutexLock lock(&mu_);
    save_floor_ = kNotSaving;
  });

  CONVOY_RETURN_IF_ERROR(sink->Begin(snapshot.state));
  std::string records;
  auto flush_every = [&records, sink](size_t i, size_t n) {
    if ((i + 1) % kRecordsPerBatch != 0 && i + 1 != n) return absl::OkStatus();
    const absl::Status written =
        sink->Write(reinterpret_cast<const uint8_t*>(records.data()), records.size());
    records.clear();
    return written;
  };
  for (size_t i = 0; i < snapshot.depths.size(); ++i) {
    PutU16(snapshot.depths[i], &records);
    CONVOY_RETURN_IF_ERROR(flush_every(i, snapshot.depths.size()));
  }
  for (size_t i = 0; i < snapshot.obs_frames.size(); ++i) {
    PutU64(snapshot.obs_frames[i], &records);
    PutI32(snapshot.actions[i], &records);
    PutF32(snapshot.rewards[i], &records);
    PutU8(snapshot.terminals[i], &records);
    if (!snapshot.priorities.empty()) PutF64(snapshot.priorities[i], &records);
    CONVOY_RETURN_IF_ERROR(flush_every(i, snapshot.obs_frames.size()));
  }
  return SaveFrames(&snapshot, sink);
}

void ReplayMemory::TakeSnapshot(SaveSnapshot* snapshot) const {
  // Everything but the frames is copied at once (some 25 bytes a transition); the frames a piece at
  // a time, oldest first, each piece under the mutex and written outside it. save_floor_ keeps the
  // writes off the frames not yet copied, so the file is the state at the first copy.
  ReplayMemoryState& state = snapshot->state;
  const uint64_t end_frame = next_frame_;
  state.first_frame = end_frame;
  if (end_frame > 0) {
    const uint64_t newest =
        oldest_id_ < next_id_ ? obs_frame_[oldest_id_ % transition_slots_] : end_frame - 1;
    state.first_frame = newest - frame_depth_[newest % frame_slots_];
  }
  std::ostringstream rng_text;
  rng_text << rng_;
  state.next_frame = next_frame_;
  state.in_episode = in_episode_;
  state.oldest_id = oldest_id_;
  state.next_id = next_id_;
  state.pending = pending_;
  state.max_priority = max_priority_;
  state.sampled = sampled_;
  state.rng = rng_text.str();

  snapshot->depths.reserve(end_frame - state.first_frame);
  for (uint64_t f = state.first_frame; f < end_frame; ++f) {
    snapshot->depths.push_back(frame_depth_[f % frame_slots_]);
  }
  const size_t held = next_id_ - oldest_id_;
  snapshot->obs_frames.resize(held);
  snapshot->actions.resize(held);
  snapshot->rewards.resize(held);
  snapshot->terminals.resize(held);
  if (tree_ != nullptr) snapshot->priorities.resize(held);
  for (size_t i = 0; i < held; ++i) {
    const size_t slot = (oldest_id_ + i) % transition_slots_;
    snapshot->obs_frames[i] = obs_frame_[slot];
    snapshot->actions[i] = action_[slot];
    snapshot->rewards[i] = reward_[slot];
    snapshot->terminals[i] = terminal_[slot];
    if (tree_ != nullptr) snapshot->priorities[i] = tree_->Get(slot);
  }
  snapshot->in_piece = static_cast<size_t>(
      std::min<uint64_t>(snapshot->piece_frames, end_frame - state.first_frame));
  CopyFrames(state.first_frame, snapshot->in_piece, snapshot->piece.data());
  snapshot->copied = state.first_frame + snapshot->in_piece;
  if (snapshot->copied < end_frame) save_floor_ = snapshot->copied;
}

absl::Status ReplayMemory::SaveFrames(SaveSnapshot* snapshot, ReplaySaveSink* sink) const {
  const uint64_t end_frame = snapshot->state.next_frame;
  CONVOY_RETURN_IF_ERROR(sink->Write(snapshot->piece.data(), snapshot->in_piece * frame_bytes_));
  while (snapshot->copied < end_frame) {
    {
      absl::MutexLock lock(&mu_);
      snapshot->in_piece = static_cast<size_t>(
          std::min<uint64_t>(snapshot->piece_frames, end_frame - snapshot->copied));
      CopyFrames(snapshot->copied, snapshot->in_piece, snapshot->piece.data());
      snapshot->copied += snapshot->in_piece;
      save_floor_ = snapshot->copied < end_frame ? snapshot->copied : kNotSaving;
    }
    CONVOY_RETURN_IF_ERROR(sink->Write(snapshot->piece.data(), snapshot->in_piece * frame_bytes_));
  }
  return absl::OkStatus();
}

absl::Status ReplayMemory::CheckState(const ReplayMemoryState& s,
                                      const ReplayArraySource& in) const {
  // Every index below is checked against the ring before it is used: a state that passed the
  // digest was written by Save, but one written by another build must not crash a reader.
  const uint64_t held = s.next_id - s.oldest_id;
  if (s.first_frame > s.next_frame || s.next_frame - s.first_frame > frame_slots_ ||
      s.oldest_id > s.next_id || held >= transition_slots_ || s.pending > held ||
      s.pending >= static_cast<uint64_t>(options_.n_step) || (!s.in_episode && s.pending > 0) ||
      held - s.pending > options_.capacity || (s.next_frame == 0 && (held > 0 || s.in_episode)) ||
      (s.next_frame > 0 && s.first_frame == s.next_frame) || !IsFinite(s.max_priority) ||
      s.max_priority <= 0.0 || s.rng.size() > kMaxRngTextBytes) {
    return in.Corrupt("its counters are inconsistent");
  }
  return absl::OkStatus();
}

absl::Status ReplayMemory::Restore(const ReplayMemoryState& state, ReplayArraySource* in) {
  CONVOY_RETURN_IF_ERROR(CheckState(state, *in));
  absl::MutexLock lock(&mu_);
  std::istringstream rng_in(state.rng);
  rng_in >> rng_;
  if (rng_in.fail()) return in->Corrupt("its random state does not parse");
  CONVOY_RETURN_IF_ERROR(RestoreDepths(state, in));
  CONVOY_RETURN_IF_ERROR(RestoreTransitions(state, in));
  for (uint64_t f = state.first_frame; f < state.next_frame; ++f) {
    EnsureChunk(f % frame_slots_);
    CONVOY_RETURN_IF_ERROR(in->Read(FrameData(f), frame_bytes_));
  }
  next_frame_ = state.next_frame;
  in_episode_ = state.in_episode;
  oldest_id_ = state.oldest_id;
  next_id_ = state.next_id;
  pending_ = state.pending;
  max_priority_ = state.max_priority;
  sampled_ = state.sampled;
  return absl::OkStatus();
}

absl::Status ReplayMemory::RestoreDepths(const ReplayMemoryState& state, ReplayArraySource* in) {
  const uint16_t max_depth = static_cast<uint16_t>(options_.frame_stack - 1);
  std::vector<uint8_t> buffer;
  for (uint64_t f = state.first_frame; f < state.next_frame;) {
    const size_t n =
        static_cast<size_t>(std::min<uint64_t>(kRecordsPerBatch, state.next_frame - f));
    buffer.resize(n * 2);
    CONVOY_RETURN_IF_ERROR(in->Read(buffer.data(), buffer.size()));
    Decoder records(buffer.data());
    for (size_t i = 0; i < n; ++i, ++f) {
      const uint16_t depth = records.U16();
      if (depth > max_depth) return in->Corrupt("a frame's stack depth is out of range");
      frame_depth_[f % frame_slots_] = depth;
    }
  }
  return absl::OkStatus();
}

absl::Status ReplayMemory::RestoreTransitions(const ReplayMemoryState& state,
                                              ReplayArraySource* in) {
  const size_t record_bytes = 8 + 4 + 4 + 1 + (tree_ != nullptr ? 8 : 0);
  const uint64_t sampleable_end = state.next_id - state.pending;
  std::vector<uint8_t> buffer;
  for (uint64_t id = state.oldest_id; id < state.next_id;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(kRecordsPerBatch, state.next_id - id));
    buffer.resize(n * record_bytes);
    CONVOY_RETURN_IF_ERROR(in->Read(buffer.data(), buffer.size()));
    Decoder records(buffer.data());
    for (size_t i = 0; i < n; ++i, ++id) {
      const size_t slot = id % transition_slots_;
      const uint64_t obs = records.U64();
      // Observations are consecutive-or-later frames, each with its next frame stored.
      if (obs < state.first_frame || obs >= state.next_frame - 1 ||
          (id > state.oldest_id && obs <= obs_frame_[(id - 1) % transition_slots_])) {
        return in->Corrupt("a transition's frame is out of range");
      }
      obs_frame_[slot] = obs;
      action_[slot] = records.I32();
      reward_[slot] = records.F32();
      const uint8_t terminal = records.U8();
      if (terminal > 1) return in->Corrupt("a transition's terminal flag is not 0 or 1");
      terminal_[slot] = terminal;
      if (tree_ != nullptr) {
        const double priority = records.F64();
        // Sampleable transitions have a positive priority, held-back ones none yet.
        if (id < sampleable_end ? !(IsFinite(priority) && priority > 0.0) : priority != 0.0) {
          return in->Corrupt("a transition's priority is out of range");
        }
        tree_->Set(slot, priority);
      }
    }
  }
  // Every stack a sample or CurrentObservation gathers (newest frame from the oldest transition's
  // observation on) lies within the frames stored.
  if (state.next_frame > 0) {
    const uint64_t lowest_newest = state.next_id > state.oldest_id
                                       ? obs_frame_[state.oldest_id % transition_slots_]
                                       : state.next_frame - 1;
    for (uint64_t f = lowest_newest; f < state.next_frame; ++f) {
      if (frame_depth_[f % frame_slots_] > f - state.first_frame) {
        return in->Corrupt("a stack reaches before the frames stored");
      }
    }
  }
  return absl::OkStatus();
}
}  // namespace convoy::agent
