// TrainingRun: one training run on this machine as convoy_train and convoy_bench_learn both run it.
// It starts a LocalCluster (convoy_ps and the agents), polls it until every agent has stopped,
// validating the server's weights along the way (BestPolicy: the run's best policy and its learning
// curve), and at the end pulls the server's last weights and averaged network and stops convoy_ps
// with its final checkpoint. The binaries only say what happened: an observer hears the progress
// and each validation. HandOver (hand_over.h) takes the run's end from here.
//
// Where the two binaries' rules differed, these are the run's:
//   - a validation that fails is logged and skipped: the run goes on (a curve with a point missing
//     is still a curve; the bench used to abandon the run);
//   - validations keep their cadence (every validate_every from the start) unless one overran it;
//   - a stop request signals the agents once, and no validation starts after it;
//   - after the agents stop, their last progress lines are read before the totals are taken;
//   - convoy_ps is given stop_timeout for its final checkpoint.
#ifndef CONVOY_DEPLOY_LOCAL_TRAINING_RUN_H_
#define CONVOY_DEPLOY_LOCAL_TRAINING_RUN_H_

#include <atomic>
#include <csignal>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/environment/environment.h"
#include "agent/evaluation/evaluation.h"
#include "deploy/local/hand_over.h"
#include "deploy/local/local_cluster.h"

namespace convoy::deploy {

struct TrainingRunOptions {
  LocalClusterOptions cluster;
  // The scenario validations drive (the agents' own, as the cluster's options name it).
  agent::EnvironmentSpec spec;
  // Between validations of the server's weights; zero: none during the run (the run then hands
  // over its last weights).
  absl::Duration validate_every = absl::Seconds(60);
  int validation_episodes = 10;
  std::string best_weights_path;                    // Where the best validated weights are kept.
  absl::Duration report_every = absl::Seconds(5);   // Between OnProgress calls.
  absl::Duration stop_timeout = absl::Seconds(60);  // convoy_ps's final checkpoint.
  // Preemption, as a cluster's scheduler does it (LocalCluster::RestartAgents): this long into the
  // run every agent gets `preempt_signal` and is started again for the rest of the run (with its
  // replay checkpoint when the cluster keeps them). Zero: never.
  absl::Duration preempt_agents_after = absl::ZeroDuration();
  // Or once the agents have driven this many environment steps each on average (0: never).
  uint64_t preempt_agents_after_steps = 0;
  int preempt_signal = SIGTERM;
};

// One validation: a point of the run's learning curve.
struct ValidationPoint {
  double wall_seconds = 0;  // Since the agents started.
  double env_steps = 0;     // All agents together.
  double train_steps = 0;   // All agents together (minibatches).
  uint64_t version = 0;     // The server's weights validated.
  double eval_seconds = 0;  // How long the validation itself took.
  bool best_yet = false;    // It became the run's best.
  agent::EvalSummary summary;  // On the validation seeds.
};

class TrainingRunObserver {
 public:
  virtual ~TrainingRunObserver() = default;
  // Every report_every while the agents run.
  virtual void OnProgress(const ClusterTotals& totals, size_t agents, absl::Duration elapsed,
                          uint64_t ps_version) {}
  // After each validation that succeeded; `best` holds the run's best so far.
  virtual void OnValidation(const ValidationPoint& point, const agent::BestPolicy& best) {}
  // The stop request was seen and the agents were asked to stop.
  virtual void OnStopping() {}
};

class TrainingRun {
 public:
  // Starts the cluster, then the validation. Errors: LocalCluster::Start's (FAILED_PRECONDITION for
  // a run directory with checkpoints and resume off, before anything is started), and
  // BestPolicy::Create's (the cluster is stopped again).
  static absl::StatusOr<std::unique_ptr<TrainingRun>> Start(const TrainingRunOptions& options,
                                                            TrainingRunObserver* observer);

  // Polls until every agent has stopped, validating every validate_every. Once `stop` is true, asks
  // the agents to stop (interrupted() from then on). Then waits up to 5 s for each agent and reads
  // their last progress lines.
  void Train(const std::atomic<bool>& stop);

  // After Train: validates the server's last weights too (a point of the curve), pulls the
  // averaged network when the run keeps one (a failure is logged and leaves it out), and stops
  // convoy_ps. Errors: the last weights' pull (convoy_ps is stopped all the same).
  absl::StatusOr<RunEnd> Finish();

  LocalCluster& cluster() { return *cluster_; }
  const TrainingRunOptions& options() const { return options_; }
  // Null when validation is off.
  agent::BestPolicy* best() { return best_.get(); }
  const std::vector<ValidationPoint>& curve() const { return curve_; }
  bool interrupted() const { return interrupted_; }
  int failed_agents() const { return failed_agents_; }
  double training_seconds() const { return training_seconds_; }
  // convoy_ps's exit code after Finish (0: its final checkpoint was written); nullopt when it did
  // not exit in stop_timeout.
  std::optional<int> ps_exit_code() const { return ps_exit_code_; }

 private:
  TrainingRun(const TrainingRunOptions& options, TrainingRunObserver* observer,
              std::unique_ptr<LocalCluster> cluster, std::unique_ptr<agent::BestPolicy> best);
  // Validates `weights` (server version `version`) and adds the point; logs a failure.
  void Validate(uint64_t version, const std::vector<float>& weights);
  bool PreemptionDue() const;
  // Restarts every agent (preempt_agents_after), for the rest of the run's time.
  void Preempt();

  const TrainingRunOptions options_;
  TrainingRunObserver* const observer_;
  std::unique_ptr<LocalCluster> cluster_;
  std::unique_ptr<agent::BestPolicy> best_;
  absl::Time start_;
  std::vector<ValidationPoint> curve_;
  bool interrupted_ = false;
  bool preempted_ = false;
  int failed_agents_ = 0;
  double training_seconds_ = 0;
  std::optional<int> ps_exit_code_;
};

}  // namespace convoy::deploy

#endif  // CONVOY_DEPLOY_LOCAL_TRAINING_RUN_H_
