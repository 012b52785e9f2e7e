// LocalCluster: a training run on this machine as processes — one convoy_ps and N convoy_agent
// processes on the embedded simulator — for convoy_train and convoy_bench_learn.
//
// Start() launches convoy_ps with a port file, waits until it listens, then launches the agents
// with their stdout piped; Poll() reads the agents' "PROGRESS key=value ..." lines; Totals() merges
// the newest line of each agent; PullWeights() fetches the server's online network; Stop() ends the
// agents (SIGTERM), then the server (SIGTERM, which writes its final checkpoint). Logs and
// checkpoints go under `run_dir`. Thread-compatible: one thread drives a LocalCluster.
#ifndef CONVOY_DEPLOY_LOCAL_LOCAL_CLUSTER_H_
#define CONVOY_DEPLOY_LOCAL_LOCAL_CLUSTER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/client/ps_client.h"
#include "common/model/model_registry.h"
#include "common/settings/agent_settings.h"
#include "common/settings/run_defaults.h"
#include "common/settings/run_settings.h"
#include "common/support/child_process.h"
#include "common/support/progress_record.h"
#include "common/support/time_split.h"

namespace convoy::deploy {

// The defaults are convoy_train's. RunSettings: the run settings of the table
// (common/settings/run_settings.h), a run on one machine's defaults (run_defaults::kLocalRunSettings),
// passed once, to convoy_ps, whose RunConfig the agents adopt on Join.
// AgentSettings: each agent's own (common/settings/agent_settings.h), passed to every agent; torch_threads 0
// gives each agent this machine's cores / agents.
struct LocalClusterOptions : RunSettings, AgentSettings {
  LocalClusterOptions() : RunSettings(run_defaults::kLocalRunSettings) {}

  std::string
      bin_dir;  // Where convoy_ps and convoy_agent are; empty: beside the running executable.
  // Logs (convoy_ps.log, agent-<i>/ with each agent's CSVs and TensorBoard events), checkpoints/,
  // and what a client needs to reach the run: ps.port (ps-<i>.port with shards) and tls/
  // (common/support/local_run_files.h, which convoy_status reads). Created if missing.
  std::string run_dir;
  int agents = 2;
  uint64_t seed = 1;  // Agent i uses seed + i.
  // Beside the table, passed to convoy_ps likewise.
  std::string model = run_defaults::kLocalModel;
  // The averaged network's; 0: off. convoy_train's follows its length (LocalAverageHorizon).
  uint64_t average_horizon = run_defaults::kAverageHorizon;
  // The driving task (simulator_bridge/task/scenario.h), and a time limit overriding its own.
  std::string scenario = "traffic";
  std::optional<double> max_epoch_runtime_sec;
  // Continue the run whose checkpoints are in run_dir/checkpoints (convoy_ps --resume), and with
  // replay_checkpoints each agent from its own. Without it, a run_dir that holds checkpoints is
  // refused: FAILED_PRECONDITION from Start, nothing started.
  bool resume = false;
  // Each agent keeps its replay memory and state in run_dir/replay/agent-<i>.replay (convoy_agent
  // --replay_checkpoint_dir, every replay_checkpoint_every and when it stops).
  bool replay_checkpoints = false;
  // Each agent stops by itself after this long / this many environment steps (zero: no bound).
  absl::Duration max_time = absl::ZeroDuration();
  uint64_t max_steps_per_agent = 0;
  absl::Duration report_every = absl::Seconds(5);  // Agents' PROGRESS interval.
  absl::Duration checkpoint_every = absl::Seconds(60);
  absl::Duration ps_start_timeout = absl::Seconds(120);
  // convoy_ps processes, each serving one shard of the model (convoy_ps --num_shards): their
  // checkpoints go to checkpoints/shard-<i>, their logs to convoy_ps-<i>.log. 1: one server, as before.
  int ps_shards = 1;
  // convoy_ps --max_pushes_per_step: pushes one optimizer step may combine; 0: the server's default.
  uint32_t max_pushes_per_step = 0;
  // Every process serves Prometheus metrics on kLocalRunHost, a free port each, and Start() lists
  // them in LocalRunMetricsTargets(run_dir) for Prometheus' file_sd (label job: convoy-ps or
  // convoy-agent, as deploy/monitoring's rules name them).
  bool metrics = false;
};

// What one agent has reported on its stdout.
struct AgentProgress {
  std::optional<ProgressRecord> latest;  // Its newest PROGRESS line; none before the first.
  std::string partial;                   // An incomplete line read so far.
  bool closed = false;                   // The agent's stdout reached end of file.
};

// Sums over the agents that have reported; avg_return and epsilon are their means.
struct ClusterTotals {
  int reporting = 0;
  double episodes = 0;
  double env_steps = 0;
  double train_steps = 0;
  double env_steps_per_s = 0;    // Sum of the agents' latest interval rates.
  double train_steps_per_s = 0;  // Sum of the agents' latest interval rates.
  double avg_return = 0;
  double epsilon = 0;
  // The agents' time splits (common/support/time_split.h) and the wall seconds they cover, summed.
  TimeSplit time;
  double wall_seconds = 0;
};

class LocalCluster {
 public:
  // Starts convoy_ps and the agents. Errors: INVALID_ARGUMENT for an unknown model, FAILED_PRECONDITION
  // when run_dir/checkpoints holds checkpoints and resume is off (before anything is made), INTERNAL when a
  // process cannot be started, UNAVAILABLE when convoy_ps did not write its port within
  // ps_start_timeout (the message names its log). Whatever was started is stopped again on error.
  static absl::StatusOr<std::unique_ptr<LocalCluster>> Start(const LocalClusterOptions& options);
  ~LocalCluster();  // Stop() unless already stopped.

  LocalCluster(const LocalCluster&) = delete;
  LocalCluster& operator=(const LocalCluster&) = delete;

  // Waits up to `timeout` for agent output and reads what is there. Returns the agents still
  // running.
  int Poll(absl::Duration timeout);

  ClusterTotals Totals() const;
  const std::vector<AgentProgress>& progress() const { return progress_; }

  // Asks every agent to stop (SIGTERM: each finishes its step and exits); returns at once.
  void SignalAgents(int signal);

  // Preempts every agent as a cluster's scheduler does: `signal` (SIGTERM: each syncs, saves its
  // replay checkpoint and exits; SIGKILL: nothing more), waits up to `timeout` for each, and starts
  // each again under the same id, with --resume when replay_checkpoints is on (else with an empty
  // replay memory), to stop by itself after `remaining` (zero: no bound) or when it has driven the
  // run's max_steps_per_agent in all (a resumed agent counts its steps before; one started empty is
  // given what is left). Totals() keeps counting what an agent started afresh did before. With
  // metrics, the target file is written again. Errors: INTERNAL when an agent cannot be started,
  // UNAVAILABLE when one did not publish its metrics port.
  absl::Status RestartAgents(int signal, absl::Duration timeout, absl::Duration remaining);

  // Waits for each agent (up to `timeout` each); logs the ones that failed, naming their logs.
  // Returns their number.
  int WaitForAgents(absl::Duration timeout);

  // The server's current weights of `network` (the online ones, or the averaged network), assembled
  // from every shard. With shards, version is the sum of the shards' versions and incarnation shard
  // 0's. Errors: the PS client's (FAILED_PRECONDITION for the averaged network with averaging off).
  absl::StatusOr<agent::PullResult> PullWeights(std::vector<float>* weights,
                                                v1::Network network = v1::NETWORK_ONLINE);

  // The server's weight version (with shards, their sum), or 0 when it cannot be asked.
  uint64_t PsVersion();
  // One shard's GetStatus. Errors: the PS client's; OUT_OF_RANGE for a shard the run does not have.
  absl::StatusOr<v1::StatusResponse> PsStatus(int shard = 0);

  // Stops what still runs: agents with SIGTERM (then SIGKILL after `timeout`), then convoy_ps with
  // SIGTERM. Returns convoy_ps's exit code (0: final checkpoint written), or nullopt when it did
  // not exit in `timeout`.
  std::optional<int> Stop(absl::Duration timeout = absl::Seconds(60));

  const std::string& address() const { return address_; }
  const LocalClusterOptions& options() const { return options_; }
  const std::string& ps_log() const { return ps_log_; }

 private:
  // The run's throwaway TLS certificate (its own CA) and bearer token, under <run_dir>/tls
  // (common/support/local_run_files.h).
  struct Credentials {
    std::string cert, key, token_file, token;
  };

  LocalCluster(LocalClusterOptions options, Credentials credentials);
  absl::Status StartServers(const std::string& bin, const ModelInfo& model);
  absl::Status StartAgents();
  // Agent i's process, to stop by itself after `max_time` (zero: no bound) or `max_steps` of its
  // own (0: no bound); --resume with `resume`.
  absl::StatusOr<ChildProcess> StartAgent(int i, absl::Duration max_time, uint64_t max_steps,
                                          bool resume);
  // With options.metrics: waits for every process's metrics port and writes the target file.
  absl::Status WriteMetricsTargets();

  LocalClusterOptions options_;
  std::vector<ChildProcess> ps_;  // One per shard, in shard order.
  std::string ps_log_;            // Shard 0's.
  std::string address_;           // host:port, or every shard's, comma-separated in shard order.
  Credentials credentials_;
  std::vector<ChildProcess> agents_;
  std::vector<AgentProgress> progress_;
  // What agents restarted afresh (RestartAgents without replay checkpoints) had counted before.
  std::vector<ProgressRecord> counted_before_;
  std::vector<std::unique_ptr<agent::PsClient>> clients_;  // One per shard.
  std::vector<uint64_t> shard_begins_;
  bool stopped_ = false;
};

// The averaged network's horizon for a run of `training` on one machine: run_defaults::
// kLocalAverageHorizonPerMinute applied minibatches per minute, at least 1 (3,000 for 10 minutes).
uint64_t LocalAverageHorizon(absl::Duration training);

}  // namespace convoy::deploy

#endif  // CONVOY_DEPLOY_LOCAL_LOCAL_CLUSTER_H_
