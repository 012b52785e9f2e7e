// The replay checkpoint: an agent's replay memory and, beside it, the agent's own state, in one
// file written atomically and verified by its SHA-256, taken as of one moment. The writer stands
// beside the memory, as a table's checkpointer stands apart from the table: the memory hands over
// its state and arrays (ReplayMemory::Save) and takes them back (ReplayMemory::Restore); the file,
// its header and its compression are this writer's. The file's layout and its header's messages
// are described in proto/convoy/v1/replay_checkpoint.proto; only the memory's arrays (the frames'
// depths, the transitions and the pixels) stay raw, deflated with the header by ISA-L's igzip
// (level 1: on rendered frames 3.7 times faster than zlib's fastest for a file 1% larger,
// docs/benchmarks.md).
//
//   SaveReplayCheckpoint, LoadReplayCheckpoint  one file, written or read;
//   ReplayCheckpointPath  where agent A's file is in a directory: DIR/A.replay, so that one volume
//                         can hold every agent's;
//   ReplayCheckpointer    saves on a thread of its own, every `every` and when asked, and counts.
#ifndef CONVOY_AGENT_LEARNING_REPLAY_CHECKPOINT_H_
#define CONVOY_AGENT_LEARNING_REPLAY_CHECKPOINT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "agent/learning/replay_memory.h"
#include "convoy/v1/replay_checkpoint.pb.h"

namespace convoy::agent {

// The format this build writes and reads; the older one (2: a hand-written header of options and
// counters) is refused, naming it.
inline constexpr uint32_t kReplayCheckpointFormat = 3;

// Writes `memory` and `agent` (the caller's state beside it; empty: none) to `path` atomically:
// into a temporary file beside it (created exclusively), fsynced, renamed over `path`, the
// directory fsynced. A reader sees the old file or the whole new one. `snapshot_taken`: as
// ReplayMemory::Save's (notified also when the save fails before its snapshot). Errors:
// ErrnoError's code (common/support/files.h) with the message naming `path`; `path` is then as it
// was and the temporary file is removed.
absl::Status SaveReplayCheckpoint(const ReplayMemory& memory, const std::string& path,
                                  const v1::AgentState& agent = v1::AgentState(),
                                  absl::Notification* snapshot_taken = nullptr);

// A memory with `options` and the state SaveReplayCheckpoint wrote to `path`; with `agent`, the
// agent's state saved with it. options.seed is not used (the random state comes from the file);
// every other option must equal the saved one. Errors: NOT_FOUND when `path` does not exist
// (ErrnoError's code when it cannot be opened or read otherwise); DATA_LOSS naming `path` when it
// is not a replay checkpoint (bad magic), is truncated or corrupted (its SHA-256 does not match),
// or its header or arrays do not parse; FAILED_PRECONDITION naming `path`, the option and both
// values when it was saved with other options, or naming both formats when it is of another
// format; INVALID_ARGUMENT as ReplayMemory::Create for bad options. Nothing is half-loaded: on an
// error no memory is returned and `agent` is unchanged.
absl::StatusOr<std::unique_ptr<ReplayMemory>> LoadReplayCheckpoint(const std::string& path,
                                                                   const ReplayOptions& options,
                                                                   v1::AgentState* agent = nullptr);

// `dir`/`agent_id`.replay. INVALID_ARGUMENT when the id cannot be a file name (empty, ".", "..",
// or with a '/' or a NUL).
absl::StatusOr<std::string> ReplayCheckpointPath(absl::string_view dir, absl::string_view agent_id);

struct ReplayCheckpointStats {
  uint64_t saves = 0;       // Saves that succeeded.
  uint64_t failures = 0;    // Saves that failed (logged; the previous file stays).
  double last_seconds = 0;  // The newest successful save's duration, snapshot to rename.
  uint64_t last_bytes = 0;  // Its file's size.
  absl::Time last_time = absl::InfinitePast();  // When it ended.
};

class ReplayCheckpointer {
 public:
  // Saves `memory` to `path`; `every` zero: only when asked (SaveNow).
  ReplayCheckpointer(const ReplayMemory* memory, std::string path, absl::Duration every,
                     absl::Time start);
  ~ReplayCheckpointer();  // Waits for a save in flight.
  ReplayCheckpointer(const ReplayCheckpointer&) = delete;
  ReplayCheckpointer& operator=(const ReplayCheckpointer&) = delete;

  // A periodic save is due: `every` is set, none is in flight and `every` has passed since the
  // previous one started (or since `start`).
  bool Due(absl::Time now) const ABSL_LOCKS_EXCLUDED(mu_);
  // Starts a save of the memory with `agent` on a thread of its own and returns once the memory's
  // state has been copied (ReplayMemory::Save's snapshot): the caller, which took `agent` just
  // before, may go on adding. Waits first for a save in flight.
  void Start(v1::AgentState agent, absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);
  // Waits for a save in flight, then saves on this thread. Its status (also counted and logged).
  absl::Status SaveNow(const v1::AgentState& agent) ABSL_LOCKS_EXCLUDED(mu_);

  ReplayCheckpointStats stats() const ABSL_LOCKS_EXCLUDED(mu_);
  const std::string& path() const { return path_; }

 private:
  void Join();
  absl::Status Save(const v1::AgentState& agent, absl::Notification* snapshot_taken)
      ABSL_LOCKS_EXCLUDED(mu_);

  const ReplayMemory* const memory_;
  const std::string path_;
  const absl::Duration every_;
  std::thread saver_;  // The save in flight, if joinable; the owner's thread only.
  absl::Time last_start_;

  mutable absl::Mutex mu_;
  bool in_flight_ ABSL_GUARDED_BY(mu_) = false;
  ReplayCheckpointStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace convoy::agent

#endif  // CONVOY_AGENT_LEARNING_REPLAY_CHECKPOINT_H_
