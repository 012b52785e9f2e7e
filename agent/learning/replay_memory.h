// ReplayMemory: DQN experience replay over uint8 frames stored once and stacked by index, with
// n-step returns and optional proportional prioritized replay (PER).
#ifndef CONVOY_AGENT_LEARNING_REPLAY_MEMORY_H_
#define CONVOY_AGENT_LEARNING_REPLAY_MEMORY_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "agent/learning/sum_tree.h"
#include "common/settings/agent_settings.h"
#include "common/settings/run_defaults.h"

namespace convoy::agent {

struct ReplayOptions {
  size_t capacity = AgentSettings{}.replay_memory_size;  // transitions (--replay_memory_size)
  // {C, H, W} of ONE uint8 frame, e.g. {3, 59, 255} or {1, 84, 84}.
  std::array<int, 3> frame_shape{};
  // Observations are the last frame_stack frames, stacked along C, oldest first.
  int frame_stack = 1;
  // The run settings' defaults (common/settings/run_settings.h); a run sets them from its settings.
  int n_step = run_defaults::kNStep;  // n-step returns
  double gamma = run_defaults::kGamma;
  bool prioritized = run_defaults::kPrioritized;   // PER with a sum tree
  double alpha = run_defaults::kPriorityExponent;  // priority exponent
  double beta_start = 0.4;  // importance-sampling exponent, annealed linearly ...
  double beta_end = 1.0;
  uint64_t beta_anneal_samples = 1000000;  // ... over this many sampled transitions
  double priority_epsilon = 1e-6;
  uint64_t seed = 1;
};

// A minibatch in caller-owned memory (obs and next_obs are [n, frame_stack*C, H, W] uint8).
// Sample() resizes the vectors, so a batch reused across calls allocates only the first time.
struct ReplayBatch {
  size_t size = 0;
  std::vector<uint8_t> observations, next_observations;
  std::vector<int64_t> actions;
  std::vector<float> returns;    // sum_{k<m} gamma^k r_{t+k}, m = min(n_step, steps to episode end)
  std::vector<float> discounts;  // gamma^m, or 0 when the episode terminated within those m steps
  // Importance-sampling weights normalised to max 1 (all 1 when uniform).
  std::vector<float> weights;
  std::vector<uint64_t> ids;  // for UpdatePriorities
};

// A memory's counters and random state as a checkpoint keeps them (in its header, described in
// proto/convoy/v1/replay_checkpoint.proto); the arrays follow them.
struct ReplayMemoryState {
  uint64_t next_frame = 0;   // The frame number the next write gets.
  uint64_t first_frame = 0;  // The oldest frame saved: the oldest held transition's stack's first.
  bool in_episode = false;
  uint64_t oldest_id = 0;
  uint64_t next_id = 0;
  uint64_t pending = 0;
  double max_priority = 1.0;
  uint64_t sampled = 0;
  std::string rng;  // The sampler's std::mt19937_64, as operator<< writes it.
};

// Where ReplayMemory::Save hands a checkpoint writer what it saves: the state once, as of the
// snapshot, then the arrays (ReplayMemory::Save says which, in order) in pieces.
class ReplaySaveSink {
 public:
  virtual ~ReplaySaveSink() = default;
  virtual absl::Status Begin(const ReplayMemoryState& state) = 0;
  virtual absl::Status Write(const uint8_t* data, size_t n) = 0;
};

// Where ReplayMemory::Restore reads the arrays Save wrote.
class ReplayArraySource {
 public:
  virtual ~ReplayArraySource() = default;
  // Exactly `n` bytes, or an error (DATA_LOSS naming the file when it ends early).
  virtual absl::Status Read(uint8_t* out, size_t n) = 0;
  // DATA_LOSS naming the file: `why` it is not a valid checkpoint.
  virtual absl::Status Corrupt(absl::string_view why) const = 0;
};

// Storage. Every StartEpisode/Add writes exactly one frame into a ring of frame slots; a transition
// is the index of its observation's newest frame plus (action, reward, terminal). A stacked
// observation is gathered at sample time from the frame slots; slots before the episode's first
// frame repeat the first frame. The frame ring holds capacity + frame_stack + n_step frames and is
// allocated in chunks as it fills. This is deliberately not simulator_bridge's FrameStack, which
// holds one episode's newest stack for acting: here every frame is stored once for all the
// transitions that need it, and a stack is index arithmetic over the ring, clipped at the start of
// each frame's own episode.
//
// Capacity. At most `capacity` sampleable transitions are held (the oldest is dropped first), plus
// the up to n_step - 1 held back (below). Each episode also stores one frame that is no
// transition's observation (its last next-frame), so when the window holds many episode ends the
// frame ring fills first and size() settles a little below capacity (by about the number of
// episodes held); a transition is dropped before any frame it needs is overwritten, so every
// sampleable transition is whole.
//
// n-step. Returns are computed at sample time from the stored rewards. A transition becomes
// sampleable once its n-step window is complete: it and the n_step - 1 transitions after it in its
// episode are stored, or the episode ended within the window (terminal, or cut by a time limit,
// i.e. StartEpisode was called); so the last n_step - 1 transitions of a running episode are held
// back. A window cut by a time limit returns the steps available and bootstraps from the last frame
// of the episode with gamma^m.
//
// Ids. A transition's id is its sequence number: the k-th Add since creation has id k - 1. Ids are
// never reused.
//
// Prioritized replay (prioritized = true). Priorities p^alpha live in a SumTree; a transition
// enters with the largest priority seen so far (1 before any update). A batch of n draws one
// transition from each of n equal segments of the total priority. Weights are
// w_i = (N * P(i))^-beta with N = size(), divided by the largest w in the batch. beta goes linearly
// from beta_start to beta_end over the first beta_anneal_samples sampled transitions (beta for a
// batch uses the count before it). Uniform sampling draws with replacement.
//
// Thread-safety. All methods may be called from any thread; one mutex guards the state. The
// intended use is one acting thread calling StartEpisode/Add/CurrentObservation and one sampling
// thread calling Sample/UpdatePriorities. Sample copies the pixels into the batch while holding
// the mutex (a batch of 32 stacks of 4x84x84 is about 1.8 MB, some hundred microseconds), so an Add
// may wait that long; in exchange a frame can be overwritten as soon as no sampleable transition
// needs it. Save holds the mutex only in pieces (below).
//
// Checkpoints. Save hands the whole state to a checkpoint writer
// (agent/learning/replay_checkpoint.h, which owns the file, its header and its compression) and
// Restore takes it back into a fresh memory, which then behaves exactly as the saved one did at the
// save: the same size(), observation, ids, priorities and beta, the episode in progress goes on,
// and the same calls give the same batches (the random state is saved too). Only the held
// transitions and the frames they and the current stack need are written. A save copies the
// transitions' metadata (some 25 bytes each) and the first 4 MB of frames under the mutex, then the
// remaining frames 4 MB at a time, each under the mutex, handing each piece to the writer outside
// it: an Add may wait for one such copy (a 4 MB memcpy, well under a millisecond), and otherwise
// Add and StartEpisode wait only when they would overwrite a frame the save has not copied yet,
// i.e. when the acting thread adds frames faster than the writer takes them
// (convoy_bench_replay_checkpoint).
//
// Determinism. Sampling uses std::mt19937_64 seeded from options.seed: the same calls in the same
// order give the same batches.
class ReplayMemory {
 public:
  // INVALID_ARGUMENT on bad options.
  static absl::StatusOr<std::unique_ptr<ReplayMemory>> Create(const ReplayOptions& options);

  ReplayMemory(const ReplayMemory&) = delete;
  ReplayMemory& operator=(const ReplayMemory&) = delete;

  // Episode-structured writes from the acting thread. A frame is frame_bytes() uint8 values, CHW.
  //
  // The frame after a reset. Ends the current episode, if any, as cut by a time limit.
  void StartEpisode(const uint8_t* first_frame) ABSL_LOCKS_EXCLUDED(mu_);
  // 'terminal' means a true end (bootstrap with 0). A time-limit end is NOT terminal: call
  // Add(..., false, ...) and then StartEpisode for the next episode; the last transition still
  // bootstraps from its next frame. Must follow StartEpisode or a non-terminal Add (checked).
  void Add(int action, float reward, bool terminal, const uint8_t* next_frame)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The stacked observation of the newest frame (for acting), observation_bytes() values; after
  // StartEpisode all stack slots hold the first frame. Must follow StartEpisode (checked).
  void CurrentObservation(uint8_t* out) const ABSL_LOCKS_EXCLUDED(mu_);

  // FAILED_PRECONDITION when fewer than n sampleable transitions.
  absl::Status Sample(size_t n, ReplayBatch* batch) ABSL_LOCKS_EXCLUDED(mu_);
  // priority = (|td| + priority_epsilon)^alpha. Ids that were dropped since (or are unknown, or
  // whose td error is not finite) are ignored. Does nothing for uniform replay.
  void UpdatePriorities(const uint64_t* ids, const float* td_errors, size_t n)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Hands the whole state to `sink`: Begin with the state as of one moment, then, through Write,
  // the arrays, integers little-endian and floats as their IEEE-754 bits: per frame in
  // [first_frame, next_frame) its u16 stack depth; per id in [oldest_id, next_id) its u64
  // observation frame, i32 action, f32 reward, u8 terminal and, when prioritized, f64 priority (0
  // for a held-back one); per frame in [first_frame, next_frame) its frame_bytes() pixels. One save
  // at a time; a second waits. `snapshot_taken`, when given, is notified once the state being saved
  // has been copied (a few milliseconds in; also when the save fails before that): from then on
  // the caller may add to the memory without changing what is saved, so a caller that keeps the
  // acting thread waiting for it until then, and takes its own state on that thread just before,
  // saves both as of one moment. Errors: the sink's.
  absl::Status Save(ReplaySaveSink* sink, absl::Notification* snapshot_taken = nullptr) const
      ABSL_LOCKS_EXCLUDED(save_mu_, mu_);
  // Takes a saved state and its arrays (Save's) into this memory, which Create made and nothing
  // has been written to; its options must be the saved memory's (the checkpoint compares them).
  // Errors: in->Corrupt's DATA_LOSS when the state or the arrays are inconsistent (every index is
  // checked before it is used); `in`'s own. The memory is not to be used after an error.
  absl::Status Restore(const ReplayMemoryState& state, ReplayArraySource* in)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Blocks until size() >= n or `timeout` passes, without spinning; returns whether size() >= n.
  bool WaitForSize(size_t n, absl::Duration timeout) const ABSL_LOCKS_EXCLUDED(mu_);

  size_t size() const ABSL_LOCKS_EXCLUDED(mu_);  // sampleable transitions
  // Frame bytes + per-transition metadata, amortised over capacity, when full (print at start).
  size_t bytes_per_transition() const;
  size_t memory_bytes() const ABSL_LOCKS_EXCLUDED(mu_);  // allocated now
  // The importance-sampling exponent the next prioritized batch will use.
  double beta() const ABSL_LOCKS_EXCLUDED(mu_);
  const ReplayOptions& options() const { return options_; }

  size_t frame_bytes() const { return frame_bytes_; }
  size_t observation_bytes() const { return frame_bytes_ * options_.frame_stack; }

 private:
  struct SaveSnapshot;
  static constexpr uint64_t kNotSaving = std::numeric_limits<uint64_t>::max();

  explicit ReplayMemory(const ReplayOptions& options);

  // Writes `frame` as the next frame, dropping every transition that needs the slot it overwrites,
  // and returns its frame number.
  uint64_t PushFrame(const uint8_t* frame, bool episode_start) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops the oldest transition.
  void DropOldest() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Makes the oldest held-back transition sampleable.
  void ReleaseOldestPending() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  uint8_t* FrameData(uint64_t frame) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Allocates the chunk of frame slot `slot` if it is not yet.
  void EnsureChunk(size_t slot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Copies `count` frames from frame number `first` on to `out`, one after another.
  void CopyFrames(uint64_t first, size_t count, uint8_t* out) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether the next frame written overwrites none that a running save has still to copy.
  bool NextFrameWritable() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return save_floor_ == kNotSaving || next_frame_ < save_floor_ + frame_slots_;
  }
  // Save's first step, under the mutex: the state, the arrays but the frames, and the first piece
  // of frames; holds writes off the frames still to copy.
  void TakeSnapshot(SaveSnapshot* snapshot) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Save's last: the frames from the snapshot's piece on, a piece at a time.
  absl::Status SaveFrames(SaveSnapshot* snapshot, ReplaySaveSink* sink) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // Restore's checks of a saved state against this memory's rings.
  absl::Status CheckState(const ReplayMemoryState& state, const ReplayArraySource& in) const;
  // Restore's reads of the arrays, after the state is checked.
  absl::Status RestoreDepths(const ReplayMemoryState& state, ReplayArraySource* in)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status RestoreTransitions(const ReplayMemoryState& state, ReplayArraySource* in)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Copies the stack whose newest frame is `frame` to `out`.
  void CopyStack(uint64_t frame, uint8_t* out) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  double BetaLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  uint64_t SampleableEnd() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return next_id_ - pending_; }

  const ReplayOptions options_;
  const size_t frame_bytes_;
  const size_t frame_slots_;       // capacity + frame_stack + n_step
  const size_t transition_slots_;  // capacity + n_step: room for the held-back ones

  // Serialises saves; taken before mu_.
  mutable absl::Mutex save_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  mutable absl::Mutex mu_;

  // Frames: frame number f lives in slot f % frame_slots_, in chunk slot / kFramesPerChunk.
  std::vector<std::unique_ptr<uint8_t[]>> chunks_ ABSL_GUARDED_BY(mu_);
  size_t allocated_chunks_ ABSL_GUARDED_BY(mu_) = 0;
  // Per frame slot: frames since its episode's first frame, saturated at frame_stack - 1.
  std::vector<uint16_t> frame_depth_ ABSL_GUARDED_BY(mu_);
  uint64_t next_frame_ ABSL_GUARDED_BY(mu_) = 0;  // frame number the next write gets
  bool in_episode_ ABSL_GUARDED_BY(mu_) = false;  // StartEpisode seen and no terminal Add since

  // Transitions: id k lives in slot k % transition_slots_. Held ids are [oldest_id_, next_id_); the
  // last pending_ of them wait for their n-step window.
  std::vector<uint64_t> obs_frame_ ABSL_GUARDED_BY(mu_);
  std::vector<int32_t> action_ ABSL_GUARDED_BY(mu_);
  std::vector<float> reward_ ABSL_GUARDED_BY(mu_);
  std::vector<uint8_t> terminal_ ABSL_GUARDED_BY(mu_);
  uint64_t oldest_id_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t pending_ ABSL_GUARDED_BY(mu_) = 0;

  // Prioritized replay only.
  std::unique_ptr<SumTree> tree_ ABSL_GUARDED_BY(mu_);
  double max_priority_ ABSL_GUARDED_BY(mu_) = 1.0;
  uint64_t sampled_ ABSL_GUARDED_BY(mu_) = 0;  // transitions sampled so far, for beta

  std::mt19937_64 rng_ ABSL_GUARDED_BY(mu_);

  // While a save runs: the oldest frame it has still to copy, which no write may overwrite (frames
  // older than it are in the save already); kNotSaving otherwise.
  mutable uint64_t save_floor_ ABSL_GUARDED_BY(mu_) = kNotSaving;
};

}  // namespace convoy::agent

#endif  // CONVOY_AGENT_LEARNING_REPLAY_MEMORY_H_
