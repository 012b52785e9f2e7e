#include "agent/agent_parts.h"

#include <glog/logging.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <numeric>
#include <sstream>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/support/files.h"
#include "common/support/status_macros.h"

namespace convoy::agent {

void CountersPart::StepTaken() {
  absl::MutexLock lock(&mu_);
  saved_.set_env_steps(saved_.env_steps() + 1);
}

void CountersPart::Trained(uint64_t batch_size, double first_train_seconds) {
  absl::MutexLock lock(&mu_);
  saved_.set_train_steps(saved_.train_steps() + 1);
  last_batch_size_ = batch_size;
  if (first_train_seconds > 0) first_train_seconds_ = first_train_seconds;
}

CountersPart::EpisodeEnd CountersPart::EpisodeEnded(double episode_return) {
  absl::MutexLock lock(&mu_);
  saved_.set_episodes(saved_.episodes() + 1);
  saved_.set_last_return(episode_return);
  auto* window = saved_.mutable_recent_returns();
  window->Add(episode_return);
  if (window->size() > kReturnWindow) window->erase(window->begin());
  return {saved_.episodes(), saved_.env_steps()};
}

uint64_t CountersPart::TakeEpisodeSeed() {
  absl::MutexLock lock(&mu_);
  const uint64_t seed = saved_.episode_seed();
  saved_.set_episode_seed(seed + 1);
  return seed;
}

void CountersPart::SimulatorLost() {
  absl::MutexLock lock(&mu_);
  ++simulator_outages_;
}

uint64_t CountersPart::env_steps() const {
  absl::MutexLock lock(&mu_);
  return saved_.env_steps();
}

void CountersPart::SaveTo(v1::AgentState& state) const {
  absl::MutexLock lock(&mu_);
  *state.mutable_counters() = saved_;
}

absl::Status CountersPart::RestoreFrom(const v1::AgentState& state, absl::string_view path) {
  if (state.counters().recent_returns_size() > kReturnWindow) {
    return absl::DataLossError(absl::StrCat(path, ": the agent's returns window holds ",
                                            state.counters().recent_returns_size(),
                                            " episodes, more than ", kReturnWindow));
  }
  absl::MutexLock lock(&mu_);
  saved_ = state.counters();
  return absl::OkStatus();
}

void CountersPart::Report(AgentStats& stats) const {
  absl::MutexLock lock(&mu_);
  stats.env_steps = saved_.env_steps();
  stats.train_steps = saved_.train_steps();
  stats.episodes = saved_.episodes();
  stats.last_return = saved_.last_return();
  const auto& window = saved_.recent_returns();
  stats.average_return =
      window.empty() ? 0 : std::accumulate(window.begin(), window.end(), 0.0) / window.size();
  stats.last_batch_size = last_batch_size_;
  stats.simulator_outages = simulator_outages_;
  stats.first_train_seconds = first_train_seconds_;
}

void ExplorationPart::GoAlone(const ExplorationOptions& options) {
  absl::MutexLock lock(&mu_);
  local_.emplace(options);
  epsilon_ = local_->EpsilonFor(agent_index_);
}

void ExplorationPart::Set(double epsilon) {
  absl::MutexLock lock(&mu_);
  epsilon_ = epsilon;
}

void ExplorationPart::OnUpdateApplied() {
  absl::MutexLock lock(&mu_);
  local_->OnUpdateApplied();
  epsilon_ = local_->EpsilonFor(agent_index_);
}

double ExplorationPart::epsilon() const {
  absl::MutexLock lock(&mu_);
  return epsilon_;
}

void ExplorationPart::SaveTo(v1::AgentState& state) const {
  absl::MutexLock lock(&mu_);
  state.mutable_exploration()->set_epsilon(epsilon_);
  state.mutable_exploration()->set_global_epsilon(local_.has_value() ? local_->global_epsilon()
                                                                     : epsilon_);
}

absl::Status ExplorationPart::RestoreFrom(const v1::AgentState& state, absl::string_view /*path*/) {
  absl::MutexLock lock(&mu_);
  if (local_.has_value()) {
    local_->set_global_epsilon(state.exploration().global_epsilon());
    epsilon_ = local_->EpsilonFor(agent_index_);
  }
  return absl::OkStatus();
}

void ExplorationPart::Report(AgentStats& stats) const {
  absl::MutexLock lock(&mu_);
  stats.epsilon = epsilon_;
}

void RandomPart::SaveTo(v1::AgentState& state) const {
  std::ostringstream text;
  text << engine_;
  state.set_acting_rng(text.str());
}

absl::Status RandomPart::RestoreFrom(const v1::AgentState& state, absl::string_view path) {
  std::istringstream text(state.acting_rng());
  std::mt19937_64 engine;
  text >> engine;
  if (text.fail()) {
    return absl::DataLossError(absl::StrCat(path, ": the agent's random state does not parse"));
  }
  engine_ = engine;
  return absl::OkStatus();
}

void LearnerPart::Attach(std::function<std::string()> save_archive,
                         std::function<absl::Status(const std::string&)> load_archive) {
  save_archive_ = std::move(save_archive);
  load_archive_ = std::move(load_archive);
}

bool LearnerPart::TargetRefreshDue(uint64_t frequency) const {
  return ::convoy::TargetRefreshDue(minibatches_, minibatches_at_target_, frequency);
}

void LearnerPart::SaveTo(v1::AgentState& state) const {
  v1::AgentLearner& learner = *state.mutable_learner();
  learner.set_archive(save_archive_());
  learner.set_minibatches_since_target(minibatches_ - minibatches_at_target_);
  learner.set_train_credit(credit_);
}

absl::Status LearnerPart::RestoreFrom(const v1::AgentState& state, absl::string_view path) {
  if (absl::Status s = load_archive_(state.learner().archive()); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(path, ": ", s.message()));
  }
  credit_ = state.learner().train_credit();
  // TargetRefreshDue subtracts modulo 2^64: the target is as old as it was.
  minibatches_at_target_ = minibatches_ - state.learner().minibatches_since_target();
  return absl::OkStatus();
}

absl::Status ReplayPart::Open(const ReplayOptions& options, const std::string& checkpoint_dir,
                              absl::string_view agent_id, bool resume, absl::Duration every,
                              absl::Time start, std::optional<v1::AgentState>* saved) {
  if (checkpoint_dir.empty()) {
    CONVOY_ASSIGN_OR_RETURN(memory_, ReplayMemory::Create(options));
    return absl::OkStatus();
  }
  CONVOY_ASSIGN_OR_RETURN(const std::string path, ReplayCheckpointPath(checkpoint_dir, agent_id));
  // Made and checked now: a directory that cannot be written would otherwise fail the save at the
  // end of the run, when what it was to keep is lost.
  std::error_code made;
  std::filesystem::create_directories(checkpoint_dir, made);
  if (made || ::access(checkpoint_dir.c_str(), W_OK | X_OK) != 0) {
    return ErrnoError(made ? made.value() : errno, "cannot write replay checkpoints to",
                      checkpoint_dir);
  }
  if (resume) {
    const absl::Time load_start = absl::Now();
    v1::AgentState agent;
    absl::StatusOr<std::unique_ptr<ReplayMemory>> loaded =
        LoadReplayCheckpoint(path, options, &agent);
    if (loaded.ok()) {
      memory_ = *std::move(loaded);
      resumed_transitions_ = memory_->size();
      saved->emplace(std::move(agent));
      LOG(INFO) << agent_id << ": replay memory of " << resumed_transitions_
                << " transitions loaded from " << path << " in "
                << absl::ToDoubleSeconds(absl::Now() - load_start) << " s";
    } else if (absl::IsNotFound(loaded.status())) {
      LOG(INFO) << agent_id << ": no replay checkpoint at " << path
                << " to resume from; starting with an empty replay memory";
    } else {
      return loaded.status();
    }
  }
  if (memory_ == nullptr) {
    CONVOY_ASSIGN_OR_RETURN(memory_, ReplayMemory::Create(options));
  }
  checkpointer_ = std::make_unique<ReplayCheckpointer>(memory_.get(), path, every, start);
  return absl::OkStatus();
}

void ReplayPart::Report(AgentStats& stats) const {
  if (memory_ != nullptr) {
    stats.replay_size = memory_->size();
    stats.replay_capacity = memory_->options().capacity;
  }
  stats.resumed_transitions = resumed_transitions_;
  if (checkpointer_ == nullptr) return;
  const ReplayCheckpointStats saved = checkpointer_->stats();
  stats.replay_checkpoints = saved.saves;
  stats.replay_checkpoint_failures = saved.failures;
  stats.replay_checkpoint_seconds = saved.last_seconds;
  stats.replay_checkpoint_bytes = saved.last_bytes;
  if (saved.saves > 0) {
    stats.replay_checkpoint_unix_seconds = absl::ToUnixMicros(saved.last_time) / 1e6;
  }
}

}  // namespace convoy::agent
