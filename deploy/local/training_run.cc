#include "deploy/local/training_run.h"

#include <glog/logging.h>
#include <signal.h>

#include <algorithm>
#include <utility>

#include "absl/time/clock.h"
#include "common/support/status_macros.h"

namespace convoy::deploy {
namespace {

constexpr absl::Duration kPollEvery = absl::Milliseconds(200);
constexpr absl::Duration kAgentExitTimeout = absl::Seconds(5);

bool AllClosed(const LocalCluster& cluster) {
  for (const AgentProgress& p : cluster.progress()) {
    if (!p.closed) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<std::unique_ptr<TrainingRun>> TrainingRun::Start(const TrainingRunOptions& options,
                                                                TrainingRunObserver* observer) {
  CONVOY_ASSIGN_OR_RETURN(std::unique_ptr<LocalCluster> cluster,
                          LocalCluster::Start(options.cluster));
  std::unique_ptr<agent::BestPolicy> best;
  if (options.validate_every > absl::ZeroDuration()) {
    CONVOY_ASSIGN_OR_RETURN(
        best, agent::BestPolicy::Create(options.cluster.model, options.spec,
                                        options.validation_episodes, options.best_weights_path));
  }
  return std::unique_ptr<TrainingRun>(
      new TrainingRun(options, observer, std::move(cluster), std::move(best)));
}

TrainingRun::TrainingRun(const TrainingRunOptions& options, TrainingRunObserver* observer,
                         std::unique_ptr<LocalCluster> cluster,
                         std::unique_ptr<agent::BestPolicy> best)
    : options_(options),
      observer_(observer),
      cluster_(std::move(cluster)),
      best_(std::move(best)),
      start_(absl::Now()) {}

void TrainingRun::Validate(uint64_t version, const std::vector<float>& weights) {
  if (best_ == nullptr) return;
  ValidationPoint point;
  point.wall_seconds = absl::ToDoubleSeconds(absl::Now() - start_);
  const ClusterTotals totals = cluster_->Totals();
  point.env_steps = totals.env_steps;
  point.train_steps = totals.train_steps;
  point.version = version;
  const absl::Time eval_start = absl::Now();
  absl::StatusOr<bool> better = best_->Consider(version, weights);
  if (!better.ok()) {
    LOG(WARNING) << "validation of version " << version << " failed: " << better.status();
    return;
  }
  point.eval_seconds = absl::ToDoubleSeconds(absl::Now() - eval_start);
  point.best_yet = *better;
  point.summary = best_->last();
  curve_.push_back(point);
  if (observer_ != nullptr) observer_->OnValidation(curve_.back(), *best_);
}

void TrainingRun::Train(const std::atomic<bool>& stop) {
  absl::Time next_report = start_ + options_.report_every;
  absl::Time next_validation = start_ + options_.validate_every;
  std::vector<float> weights;
  while (cluster_->Poll(kPollEvery) > 0) {
    if (stop.load() && !interrupted_) {
      interrupted_ = true;
      cluster_->SignalAgents(SIGTERM);
      if (observer_ != nullptr) observer_->OnStopping();
    }
    if (absl::Now() >= next_report) {
      if (observer_ != nullptr) {
        observer_->OnProgress(cluster_->Totals(), cluster_->progress().size(), absl::Now() - start_,
                              cluster_->PsVersion());
      }
      next_report += options_.report_every;
    }
    if (!preempted_ && !interrupted_ && PreemptionDue()) Preempt();
    if (best_ != nullptr && !interrupted_ && absl::Now() >= next_validation) {
      // Validation runs here, between polls: the agents' output waits in their pipes meanwhile.
      absl::StatusOr<agent::PullResult> now = cluster_->PullWeights(&weights);
      if (now.ok()) {
        Validate(now->version, weights);
      } else {
        LOG(WARNING) << "cannot pull the weights to validate: " << now.status();
      }
      next_validation = std::max(next_validation + options_.validate_every, absl::Now());
    }
  }
  training_seconds_ = absl::ToDoubleSeconds(absl::Now() - start_);
  failed_agents_ = cluster_->WaitForAgents(kAgentExitTimeout);
  // The agents' final PROGRESS lines ("done") may still sit in the pipes.
  for (int i = 0; i < 20 && !AllClosed(*cluster_); ++i) cluster_->Poll(absl::Milliseconds(50));
}

bool TrainingRun::PreemptionDue() const {
  const uint64_t steps = options_.preempt_agents_after_steps;
  return (options_.preempt_agents_after > absl::ZeroDuration() &&
          absl::Now() - start_ >= options_.preempt_agents_after) ||
         (steps > 0 &&
          cluster_->Totals().env_steps >=
              static_cast<double>(steps) * static_cast<double>(options_.cluster.agents));
}

void TrainingRun::Preempt() {
  preempted_ = true;
  const absl::Duration max_time = options_.cluster.max_time;
  const absl::Duration remaining =
      max_time > absl::ZeroDuration()
          ? std::max(absl::Seconds(1), max_time - (absl::Now() - start_))
          : absl::ZeroDuration();
  LOG(INFO) << "preempting every agent (signal " << options_.preempt_signal << ") "
            << absl::ToDoubleSeconds(absl::Now() - start_) << " s into the run";
  if (absl::Status s =
          cluster_->RestartAgents(options_.preempt_signal, kAgentExitTimeout * 6, remaining);
      !s.ok()) {
    LOG(ERROR) << "restarting the agents: " << s;
  }
}

absl::StatusOr<RunEnd> TrainingRun::Finish() {
  RunEnd end;
  absl::StatusOr<agent::PullResult> pulled = cluster_->PullWeights(&end.last_weights);
  if (options_.cluster.average_horizon > 0) {
    absl::StatusOr<agent::PullResult> average =
        cluster_->PullWeights(&end.averaged, v1::NETWORK_AVERAGE);
    if (average.ok()) {
      end.average_version = average->version;
    } else {
      LOG(WARNING) << "cannot fetch the averaged network: " << average.status();
      end.averaged.clear();
    }
  }
  ps_exit_code_ = cluster_->Stop(options_.stop_timeout);
  if (!pulled.ok()) return pulled.status();
  end.last_version = pulled->version;
  // The last weights take part in the choice too.
  Validate(end.last_version, end.last_weights);
  return end;
}

}  // namespace convoy::deploy
