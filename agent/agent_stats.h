// AgentStats: the counters of an agent's run, as Agent::stats() reports them and the agent's
// metrics (agent_metrics.h) read them; a header of its own, so that what reads them needs not the
// agent itself.
#ifndef CONVOY_AGENT_AGENT_STATS_H_
#define CONVOY_AGENT_AGENT_STATS_H_

#include <cstdint>

#include "common/support/time_split.h"

namespace convoy::agent {

// Counters of a run so far.
struct AgentStats {
  uint64_t env_steps = 0;
  uint64_t train_steps = 0;
  uint64_t episodes = 0;
  uint64_t pushes = 0;
  uint64_t pushes_rejected = 0;
  uint64_t ps_version = 0;
  double epsilon = 1.0;
  double average_return = 0;       // Over the last 20 episodes.
  double last_return = 0;          // Of the newest episode.
  uint64_t last_batch_size = 0;    // Transitions in the newest minibatch trained on.
  uint64_t outage_pushes = 0;      // Pushes of what was learned while the server was away.
  bool connected = false;          // In step with the parameter server (false alone).
  uint64_t simulator_outages = 0;  // Times the simulator connection was lost (AirSim: reconnected).
  uint64_t replay_size = 0;        // Sampleable transitions in the replay memory.
  uint64_t replay_capacity = 0;    // --replay_memory_size.
  // Replay checkpoints (--replay_checkpoint_dir): saves written and failed, the newest one's
  // duration, size and Unix time (0: none yet).
  uint64_t replay_checkpoints = 0;
  uint64_t replay_checkpoint_failures = 0;
  double replay_checkpoint_seconds = 0;
  uint64_t replay_checkpoint_bytes = 0;
  double replay_checkpoint_unix_seconds = 0;
  uint64_t resumed_transitions = 0;  // Loaded from a replay checkpoint at the start (--resume).
  double first_train_seconds = 0;    // From the agent's start to its first minibatch; 0: not yet.
  // Where its time went since Run started (common/support/time_split.h), as of the latest report.
  TimeSplit time;
};

}  // namespace convoy::agent

#endif  // CONVOY_AGENT_AGENT_STATS_H_
