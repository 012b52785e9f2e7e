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
// (agent/parameter_server_sync.h), over one transport per server (agent/ps_transport.h); the loop
// here acts and learns, and tells the sync what happened.
//
// With a parameter server, the run's learner settings are the server's (RunConfig, handed over on
// Join): the model, batch_size, batch_update_frequency, gamma, n_step, target_update_frequency,
// double_dqn, max_grad_norm, learning_rate, prioritized, min_epsilon and
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
#include "agent/environment.h"
#include "agent/preprocess.h"
#include "agent/push_mode.h"
#include "common/run_defaults.h"
#include "common/run_settings.h"
#include "common/security.h"
#include "common/tensor_encoding.h"

namespace convoy {

namespace v1 {
class RunConfig;  // convoy/v1/parameter_server.proto: agent.h stays free of protobuf.
}  // namespace v1
class PushLog;  // agent/push_log.h

// AgentRunSettings (common/run_settings.h): batch_size, batch_update_frequency, gamma, n_step,
// target_update_frequency (alone: minibatches between target copies), double_dqn, max_grad_norm,
// prioritized and mirror_augmentation (LearnerOptions::mirror_actions); with a parameter server, the
// server's.
struct AgentOptions : AgentRunSettings {
  std::string agent_id = "agent-0";
  uint32_t agent_index = 0;
  uint64_t seed = 1;
  std::string ps_address;  // Empty: train alone.
  ClientSecurity ps_security = [] {  // TLS and bearer token for the parameter server.
    ClientSecurity plaintext;
    plaintext.insecure = true;
    return plaintext;
  }();
  EnvironmentSpec environment;
  std::string model = run_defaults::kLocalModel;  // With --ps and not pinned: the server's.
  std::string device = "auto";
  bool amp = false;
  int torch_threads = 0;  // LibTorch intra-op threads on CPU; 0 keeps LibTorch's default (all cores).
  // The cookbook's names.
  size_t replay_memory_size = 100000;
  double min_epsilon = run_defaults::kMinEpsilon;
  double per_iter_epsilon_reduction = run_defaults::kPerIterEpsilonReduction;  // Alone: per update.
  // Beyond the cookbook.
  size_t min_replay_size = 1000;
  bool fill_with_random_actions = true;  // Act at random until min_replay_size, as the cookbook did.
  double replay_ratio = 8.0;             // Sampled transitions per environment step.
  double learning_rate = run_defaults::kLearningRate;
  // The run settings above given explicitly, by their flag names ("batch_size", "model", ...): with a
  // parameter server, one of these that disagrees with the server's is an error, not adopted.
  std::set<std::string> pinned;
  // At the end of a run with a parameter server that is away: how long to keep trying to rejoin so that
  // the last local steps reach it.
  absl::Duration final_sync_for = absl::Seconds(10);
  // With a parameter server, how long training waits for the answer to a push and pull (acting goes
  // on, until it is a sync's worth of minibatches ahead of the replay ratio). Past it the agent is
  // out of step: it learns locally, as in an outage, and pushes what it learned once the server
  // answers. So a silent link costs acting at most this, once.
  absl::Duration sync_wait = absl::Seconds(1);
  PushMode push = PushMode::kGradients;
  TensorEncoding push_encoding = TensorEncoding::kFp32;
  // Bounds: whichever comes first; 0 / zero duration = unbounded.
  uint64_t max_steps = 0;
  absl::Duration max_time = absl::ZeroDuration();
  std::string log_dir;  // Metrics CSV, TensorBoard events, weights.pt; empty: no files.
  absl::Duration report_every = absl::Seconds(5);
  bool machine_progress = false;  // Also print "PROGRESS key=value ..." lines on stdout (for convoy_train).
  // Null: none. Otherwise every minibatch trained and every answer of a server to a push is logged
  // there (agent/push_log.h), for checking a run against the servers' apply logs.
  std::shared_ptr<PushLog> push_log;
};

// Takes the server's model and run settings into *options: each one `config` carries (logged as
// adopted); one named in options->pinned that disagrees is refused: INVALID_ARGUMENT naming the
// agent's flag and value, the server's value and the convoy_ps flag, with *options unchanged.
absl::Status AdoptRunConfig(const v1::RunConfig& config, AgentOptions* options);

// Counters of a run so far.
struct AgentStats {
  uint64_t env_steps = 0;
  uint64_t train_steps = 0;
  uint64_t episodes = 0;
  uint64_t pushes = 0;
  uint64_t pushes_rejected = 0;
  uint64_t ps_version = 0;
  double epsilon = 1.0;
  double average_return = 0;  // Over the last 20 episodes.
  uint64_t last_batch_size = 0;  // Transitions in the newest minibatch trained on.
  uint64_t outage_pushes = 0;    // Pushes of what was learned while the server was away.
  bool connected = false;        // In step with the parameter server (false alone).
  uint64_t simulator_outages = 0;  // Times the simulator connection was lost (AirSim: reconnected).
};

class Agent {
 public:
  // Builds the environment, learner, replay memory and (with --ps) joins the parameter server.
  // Errors: INVALID_ARGUMENT for bad options; FAILED_PRECONDITION for a model mismatch with the server.
  static absl::StatusOr<std::unique_ptr<Agent>> Create(const AgentOptions& options);
  ~Agent();

  // Trains until max_steps, max_time or `*stop` becomes true; then a last sync and, with a log_dir, the
  // final weights in log_dir/weights.pt.
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

}  // namespace convoy

#endif  // CONVOY_AGENT_AGENT_H_
