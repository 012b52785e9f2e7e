// Agent: one car, one replay memory, one DQN learner, kept in step with the parameter server.
//
// One thread acts: epsilon-greedy on the local Q-network, the transition into the replay memory.
// Learning interleaves with acting at `replay_ratio` sampled transitions per environment step,
// minibatches assembled by a background BatchSampler so the learner never waits on replay. Every
// `batch_update_frequency` minibatches (the cookbook's name) the agent synchronises:
//   --ps set, push=gradients: push the mean gradient with the version it was computed on, then pull
//   the
//                             newest weights (and the target network when its version changed);
//   --ps set, push=deltas:    the local Adam steps every minibatch; push the weight change since
//   the last
//                             sync (the server runs --optimizer=delta), then pull;
//   alone:                    the local Adam steps; the target network is copied every
//                             target_update_frequency minibatches; epsilon decays locally.
// The exchanges with the server run on threads of their own (ShardWorker): acting never waits on
// the network. Training waits up to sync_wait at the next sync point for the previous exchange's
// answer, so that every push holds the gradients of the weights it names; an answer later than that
// puts the agent out of step, as does an unreachable server: it keeps acting and learning locally,
// retries Join every few seconds, and once the server answers pushes what it learned meanwhile (the
// weight change, or the mean of the gradients it stepped with), pulls the server's weights and
// carries on. The last steps of a run reach the server too: Run() ends with a sync, rejoining first
// (for up to final_sync_for, plus what an exchange in flight takes to end) when the server is away.
// When an AirSim connection drops it reconnects and restarts the episode.
// Where the agent stands with each server and what it owes it are ParameterServerSync's
// (agent/client/parameter_server_sync.h), over one transport per server
// (agent/client/ps_transport.h); the loop here acts and learns, and tells the sync what happened.
//
// With a parameter server, the run's learner settings are the server's (RunConfig, handed over on
// Join): the model, batch_size, batch_update_frequency, gamma, n_step, target_update_frequency,
// double_dqn, learner_max_grad_norm, learning_rate, prioritized, min_epsilon and
// per_iter_epsilon_reduction. The agent adopts each and logs what it adopted; one named in `pinned`
// (given explicitly) that disagrees with the server is an error at start. Alone, the options below
// apply as they are.
#ifndef CONVOY_AGENT_AGENT_H_
#define CONVOY_AGENT_AGENT_H_

#include <atomic>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "agent/agent_stats.h"
#include "agent/client/push_mode.h"
#include "agent/environment/environment.h"
#include "agent/environment/preprocess.h"
#include "common/settings/agent_settings.h"
#include "common/settings/run_defaults.h"
#include "common/settings/run_settings.h"
#include "common/wire/security.h"
#include "common/wire/tensor_encoding.h"

namespace convoy::v1 {
class RunConfig;  // convoy/v1/parameter_server.proto: agent.h stays free of protobuf.
}  // namespace convoy::v1

namespace convoy::agent {

class SyncObserver;  // agent/client/sync_observer.h

// RunSettings (common/settings/run_settings.h): batch_size, batch_update_frequency, gamma, n_step,
// target_update_frequency (alone: minibatches between target copies), double_dqn,
// learner_max_grad_norm, prioritized, mirror_augmentation (LearnerOptions::mirror_actions),
// learning_rate (the local Adam's), min_epsilon and per_iter_epsilon_reduction (alone: per update);
// with a parameter server, the server's. AgentSettings (common/settings/agent_settings.h): the
// agent's own — device, amp, torch_threads, replay_memory_size, min_replay_size,
// fill_with_random_actions, replay_ratio; with a parameter server, sync_wait (how long training
// waits for an exchange's answer; acting goes on until it is a sync's worth of minibatches ahead of
// the replay ratio) and final_sync_for (how long the end of a run tries to rejoin a server that is
// away, so that the last local steps reach it).
struct AgentOptions : RunSettings, AgentSettings {
  std::string agent_id = "agent-0";
  uint32_t agent_index = 0;
  uint64_t seed = 1;
  std::string ps_address;            // Empty: train alone.
  ClientSecurity ps_security = [] {  // TLS and bearer token for the parameter server.
    ClientSecurity plaintext;
    plaintext.insecure = true;
    return plaintext;
  }();
  EnvironmentSpec environment;
  // Beside the tables: the server's default model (cookbook) is not an agent's (compact).
  std::string model = run_defaults::kLocalModel;  // With --ps and not pinned: the server's.
  // The run settings above given explicitly, by their flag names ("batch_size", "model", ...): with
  // a parameter server, one of these that disagrees with the server's is an error, not adopted.
  std::set<std::string> pinned;
  PushMode push = PushMode::kGradients;
  TensorEncoding push_encoding = TensorEncoding::kFp32;
  // Bounds: whichever comes first; 0 / zero duration = unbounded.
  uint64_t max_steps = 0;
  absl::Duration max_time = absl::ZeroDuration();
  std::string log_dir;  // Metrics CSV, TensorBoard events, weights.pt; empty: no files.
  // Replay checkpoints (agent/learning/replay_checkpoint.h; the state: agent/agent_parts.h): the
  // replay memory and the agent's state in replay_checkpoint_dir/<agent_id>.replay, every
  // replay_checkpoint_every and at the end of Run (a SIGTERM's too); empty: none. With `resume`,
  // Create continues from that file when there is one (with an empty memory, as a fresh agent, when
  // there is none): transitions, priorities, counters (max_steps counts the steps before),
  // exploration, the learner with its optimizer, and the acting random state. With a parameter
  // server the weights and epsilon are the server's, pulled on Join as always.
  std::string replay_checkpoint_dir;
  bool resume = false;
  absl::Duration report_every = absl::Seconds(5);
  bool machine_progress =
      false;  // Also print "PROGRESS key=value ..." lines on stdout (for convoy_train).
};

// Takes the server's model and run settings into *options: each one `config` carries (logged as
// adopted); one named in options->pinned that disagrees is refused: INVALID_ARGUMENT naming the
// agent's flag and value, the server's value and the convoy_ps flag, with *options unchanged.
absl::Status AdoptRunConfig(const v1::RunConfig& config, AgentOptions* options);

class Agent {
 public:
  // Builds the environment, learner, replay memory and (with --ps) joins the parameter server.
  // `observer` (none: null) is told every minibatch trained and every answer of a server to a push
  // (agent/client/sync_observer.h; convoy_agent's --push_log is one).
  // Errors: INVALID_ARGUMENT for bad options; FAILED_PRECONDITION for a model mismatch with the
  // server. With `resume`: the replay checkpoint's errors (LoadReplayCheckpoint: DATA_LOSS for a
  // torn or corrupted file, FAILED_PRECONDITION for one of other replay options), and
  // FAILED_PRECONDITION for one of another agent id or model, each naming the file.
  static absl::StatusOr<std::unique_ptr<Agent>> Create(
      const AgentOptions& options, std::shared_ptr<SyncObserver> observer = nullptr);
  ~Agent();

  // Trains until max_steps, max_time or `*stop` becomes true; then a last sync, with a log_dir the
  // final weights in log_dir/weights.pt, and with a replay_checkpoint_dir the last replay
  // checkpoint (its failure is Run's error).
  absl::Status Run(const std::atomic<bool>& stop);

  AgentStats stats() const;
  // The options in force: as given, with the parameter server's run settings adopted.
  const AgentOptions& options() const;
  // The current local weights, flat in layout order.
  std::vector<float> Weights() const;

 private:
  class Impl;
  explicit Agent(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace convoy::agent

#endif  // CONVOY_AGENT_AGENT_H_
