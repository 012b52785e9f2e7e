// What an agent keeps so that a process started again with --resume goes on where the last one
// stopped (preempted by Slurm, its pod moved, its node lost): the replay memory, and beside it, in
// the replay checkpoint's annex (ReplayMemory::SaveTo), the agent's own state. The two are one
// file, written atomically and verified by its SHA-256, and taken as of one moment.
//
//   AgentCheckpoint       the agent's state: counters, exploration, the acting random state and the
//                         learner's (DqnLearner::SaveState), as msgpack;
//   ReplayCheckpointPath  where agent A's file is in a directory: DIR/A.replay, so that one volume
//                         can hold every agent's;
//   ReplayCheckpointer    saves on a thread of its own, every `every` and when asked, and counts.
#ifndef CONVOY_AGENT_AGENT_CHECKPOINT_H_
#define CONVOY_AGENT_AGENT_CHECKPOINT_H_

#include <cstdint>
#include <memory>
#include <msgpack.hpp>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace convoy {

class ReplayMemory;  // agent/learning/replay_memory.h

// The agent's state beside its replay memory. Counters are the run's, over every process of the
// agent; minibatches are per process (a push log counts them so) and are not kept.
struct AgentCheckpoint {
  static constexpr int kFormat = 1;
  int format = kFormat;
  std::string agent_id;
  std::string model;  // The registry name the learner state is of.
  uint64_t seed = 0;
  uint64_t env_steps = 0;
  uint64_t train_steps = 0;
  uint64_t episodes = 0;
  uint64_t episode_seed = 0;  // Episodes started: the next episode's start is the next seed.
  double epsilon = 1.0;
  double global_epsilon = 1.0;  // Alone: the local schedule's; with a server, the server's is used.
  std::vector<double> recent_returns;  // The average return's window, oldest first.
  double last_return = 0;
  uint64_t minibatches_since_target = 0;  // Alone: since the target network was last copied.
  double train_credit = 0;                // Minibatches the replay ratio still owes.
  std::string acting_rng;                 // The std::mt19937_64 of acting, as operator<< writes it.
  std::vector<char> learner;              // DqnLearner::SaveState.

  MSGPACK_DEFINE_MAP(format, agent_id, model, seed, env_steps, train_steps, episodes, episode_seed,
                     epsilon, global_epsilon, recent_returns, last_return, minibatches_since_target,
                     train_credit, acting_rng, learner);
};

std::string EncodeAgentCheckpoint(const AgentCheckpoint& checkpoint);
// DATA_LOSS naming `path` when `bytes` is not an encoded AgentCheckpoint, or one of another
// format.
absl::StatusOr<AgentCheckpoint> DecodeAgentCheckpoint(absl::string_view bytes,
                                                      absl::string_view path);

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
  // Starts a save of the memory with `annex` on a thread of its own and returns once the memory's
  // state has been copied (ReplayMemory::SaveTo's snapshot): the caller, which took `annex` just
  // before, may go on adding. Waits first for a save in flight.
  void Start(std::string annex, absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);
  // Waits for a save in flight, then saves on this thread. Its status (also counted and logged).
  absl::Status SaveNow(std::string annex) ABSL_LOCKS_EXCLUDED(mu_);

  ReplayCheckpointStats stats() const ABSL_LOCKS_EXCLUDED(mu_);
  const std::string& path() const { return path_; }

 private:
  void Join();
  absl::Status Save(const std::string& annex, absl::Notification* snapshot_taken)
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

}  // namespace convoy

#endif  // CONVOY_AGENT_AGENT_CHECKPOINT_H_
