#include "agent/agent.h"

#include <glog/logging.h>
#include <unistd.h>

#include <array>
#include <climits>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "agent/agent_parts.h"
#include "agent/client/parameter_server_sync.h"
#include "agent/client/ps_transport.h"
#include "agent/client/push_log.h"
#include "agent/client/server_presence.h"
#include "agent/learning/batch_sampler.h"
#include "agent/learning/device.h"
#include "agent/learning/learner.h"
#include "agent/learning/replay_checkpoint.h"
#include "agent/learning/replay_memory.h"
#include "common/metrics/metrics.h"
#include "common/model/model_registry.h"
#include "common/model/torch_compat.h"  // After LibTorch: glog's LOG.
#include "common/model/weights_file.h"
#include "common/settings/exploration.h"
#include "common/support/backoff.h"
#include "common/support/files.h"
#include "common/support/gpu_monitor.h"
#include "common/support/progress_record.h"
#include "common/support/status_macros.h"
#include "common/support/time_split.h"

namespace convoy::agent {
namespace {

constexpr absl::Duration kSamplerTimeout = absl::Seconds(30);
constexpr absl::Duration kWeightsEvery = absl::Seconds(60);
// A loopback or LAN server refuses at once; a longer wait is a partition, not evidence.
constexpr absl::Duration kPresenceProbeTimeout = absl::Milliseconds(500);

// The agent is the composition root: the options of its parts are made here, from its own.

// What concerns each server of --ps, with the default timings (the address is set per server).
PsTransportOptions TransportOptionsOf(const AgentOptions& agent) {
  PsTransportOptions o;
  o.agent_id = agent.agent_id;
  o.agent_index = agent.agent_index;
  o.push_encoding = agent.push_encoding;
  o.security = agent.ps_security;
  return o;
}

JoinOptions JoinOptionsOf(const AgentOptions& agent) {
  JoinOptions o;
  o.model = agent.model;
  o.model_pinned = agent.pinned.count("model") > 0;
  o.push = agent.push;
  return o;
}

// With ProbeServerPresence of `servers`, the agent's launcher being the parent process now.
SyncOptions SyncOptionsOf(const AgentOptions& agent, std::vector<std::string> servers) {
  SyncOptions o;
  o.agent_id = agent.agent_id;
  o.push = agent.push;
  o.batch_update_frequency = static_cast<uint64_t>(std::max(1, agent.batch_update_frequency));
  o.sync_wait = agent.sync_wait;
  o.final_sync_for = agent.final_sync_for;
  o.presence = ProbeServerPresence(std::move(servers), ::getppid(), kPresenceProbeTimeout);
  return o;
}

// The learner as the parameter-server sync sees it.
class LearnerModel final : public SyncedModel {
 public:
  explicit LearnerModel(DqnLearner* learner) : learner_(learner) {}
  void GetWeights(std::vector<float>* flat) override { learner_->GetWeights(flat); }
  void SetWeights(const std::vector<float>& flat) override { learner_->SetWeights(flat); }
  void SetTargetWeights(const std::vector<float>& flat) override {
    learner_->SetTargetWeights(flat);
  }
  bool TakeMeanGradient(std::vector<float>* mean_gradient) override {
    return learner_->TakeMeanGradient(mean_gradient);
  }
  bool StepLocal(std::vector<float>* mean_gradient) override {
    return learner_->StepLocal(mean_gradient);
  }

 private:
  DqnLearner* const learner_;
};

// The options the agent checks before it starts anything. Errors: INVALID_ARGUMENT naming the
// flags.
absl::Status CheckAgentOptions(const AgentOptions& options) {
  if (options.batch_size < 1 || options.batch_update_frequency < 1 || options.replay_ratio <= 0) {
    return absl::InvalidArgumentError(
        "--batch_size, --batch_update_frequency and --replay_ratio must be positive");
  }
  if (options.resume && options.replay_checkpoint_dir.empty()) {
    return absl::InvalidArgumentError(
        "--resume continues from a replay checkpoint: it needs --replay_checkpoint_dir");
  }
  if (options.learning_rate_decay_minibatches > 0 && options.learning_rate_decay_minutes > 0) {
    return absl::InvalidArgumentError(
        "--learning_rate_decay_minibatches and --learning_rate_decay_minutes both schedule the "
        "learning rate's fall: give one");
  }
  return absl::OkStatus();
}

absl::StatusOr<LearnerOptions> LearnerOptionsOf(const AgentOptions& agent,
                                                const sim::DrivingEnv& env, torch::Device device) {
  LearnerOptions learner;
  learner.model = agent.model;
  learner.num_actions = env.num_actions();
  learner.seed = agent.seed;
  learner.device = device;
  learner.double_dqn = agent.double_dqn;
  learner.max_grad_norm = agent.learner_max_grad_norm;
  learner.learning_rate = agent.learning_rate;
  learner.amp = agent.amp;
  learner.random_shift = agent.random_shift;
  if (agent.mirror_augmentation) {
    absl::StatusOr<std::vector<int64_t>> mirror = sim::MirrorActions(env.options().actions);
    if (!mirror.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--mirror_augmentation: ", mirror.status().message()));
    }
    learner.mirror_actions = *std::move(mirror);
  }
  return learner;
}

ReplayOptions ReplayOptionsOf(const AgentOptions& agent, std::array<int, 3> frame_shape,
                              int frame_stack) {
  ReplayOptions replay;
  replay.capacity = agent.replay_memory_size;
  replay.frame_shape = frame_shape;
  replay.frame_stack = frame_stack;
  replay.n_step = agent.n_step;
  replay.gamma = agent.gamma;
  replay.prioritized = agent.prioritized;
  replay.alpha = agent.priority_exponent;
  replay.seed = agent.seed;
  return replay;
}

}  // namespace

absl::Status AdoptRunConfig(const v1::RunConfig& config, AgentOptions* options) {
  AgentOptions adopted = *options;
  RunSettingAdopter adopt(options->pinned);
  if (!config.model_name().empty()) {
    adopt.Take("model", &adopted.model, config.model_name());
  }
  // The settings of the table (common/settings/run_settings.h).
  CONVOY_RETURN_IF_ERROR(AdoptRunSettings(config, &adopt, &adopted));
  LOG(INFO) << options->agent_id << ": run settings of the parameter server at "
            << options->ps_address
            << (adopt.adopted().empty()
                    ? ": all equal to this agent's"
                    : absl::StrCat(", adopted: ", absl::StrJoin(adopt.adopted(), ", ")));
  *options = std::move(adopted);
  return absl::OkStatus();
}

class Agent::Impl {
 public:
  Impl(const AgentOptions& options, std::shared_ptr<SyncObserver> observer)
      : options_(options),
        observer_(std::move(observer)),
        exploration_(options.agent_index),
        random_(options.seed),
        created_(absl::Now()) {}

  absl::Status Init();
  absl::Status Run(const std::atomic<bool>& stop);

  // The parts' figures, the sync's and the time split as of the latest report.
  AgentStats stats() const {
    AgentStats stats;
    for (const AgentPart* part : parts_) part->Report(stats);
    if (sync_ != nullptr) {
      const SyncStats sync = sync_->stats();
      stats.connected = sync.in_step;
      stats.ps_version = sync.version;
      stats.pushes = sync.pushes;
      stats.outage_pushes = sync.outage_pushes;
      stats.pushes_rejected = sync.pushes_rejected;
    }
    absl::MutexLock lock(&time_mu_);
    stats.time = reported_time_;
    return stats;
  }
  const AgentOptions& options() const { return options_; }
  std::vector<float> Weights() const {
    std::vector<float> flat;
    learner_->GetWeights(&flat);
    return flat;
  }

 private:
  absl::Status ResetEpisode();
  absl::Status ReconnectSimulator();
  int ChooseAction();
  absl::Status TrainOne();
  // One step of the loop: act, store, train on the replay ratio's credit, sync, report, save. A
  // simulator call that failed is retried on a new connection (AirSim; the embedded one's error is
  // returned).
  absl::Status ActOnce(const std::atomic<bool>& stop);
  // Trains while the replay ratio's credit lasts and training need not wait for the server, at most
  // twice what one environment step owes (rounded up); with `drain`, all of it, waiting for
  // answers.
  absl::Status TrainOnCredit(const std::atomic<bool>& stop, bool drain);
  // Alone, at a sync point: the local target refresh and epsilon the server would run.
  void SyncAlone();
  // With a server: takes a finished exchange in (and its epsilon), and starts a catch-up when due.
  void PollSession();
  ReplayMemory* replay() const { return replay_part_.memory(); }  // Once Init opened it.
  std::vector<ServerTransport*> ServerPointers() const {
    std::vector<ServerTransport*> servers;
    for (const auto& server : servers_) servers.push_back(server.get());
    return servers;
  }
  // With --ps: joins the servers (listed into `servers`) and adopts their run settings; alone: the
  // local exploration schedule.
  absl::Status JoinOrGoAlone(std::vector<std::string>* servers);
  // The replay memory: loaded from its checkpoint with --resume (and the parts' state with it),
  // else empty; and its checkpointer.
  absl::Status OpenReplay(const ReplayOptions& replay);
  // Gives each part its piece of the agent's state a replay checkpoint at `path` held.
  absl::Status Restore(const v1::AgentState& saved, const std::string& path);
  // The agent's state now, from its parts, for the replay checkpoint: on the acting thread.
  v1::AgentState CheckpointState() const;
  void EndEpisode(const sim::StepResult& last);
  // Charges the acting thread's time since the previous lap to `phase` (nothing before Run).
  void Lap(AgentPhase phase) {
    if (clock_.has_value()) clock_->Lap(phase);
  }
  // Where the agent's time went since Run started: the acting thread's phases, the sampler's and
  // the process's CPU.
  TimeSplit TimeSplitNow() const;
  // One report's figures: the stats now, and the rates, means and time split over the interval
  // since the previous report (which TakeInterval starts anew).
  struct Interval {
    absl::Time now;
    AgentStats stats;
    double env_sps = 0, train_sps = 0, loss = 0, mean_q = 0;
    ExchangeTimes exchanges;
    uint64_t ps_version = 0;
    double gpu_util = 0, gpu_mb = 0;
    TimeSplit split, interval;  // Since Run started; since the previous report.
    double wall_s = 0, interval_wall = 0;
  };
  Interval TakeInterval();
  // The report: a line on stderr, a progress record on stdout (--machine_progress) and a row of
  // the intervals table (--log_dir).
  void Report(bool final);
  void PrintReport(const Interval& r, bool final) const;
  void AppendInterval(const Interval& r);
  absl::Status OpenLogs();
  void SaveWeights();

  AgentOptions options_;
  const std::shared_ptr<SyncObserver> observer_;  // Null: none.
  torch::Device device_ = torch::kCPU;
  std::unique_ptr<Environment> environment_;
  std::optional<Preprocess> preprocess_;
  std::unique_ptr<DqnLearner> learner_;
  // The agent's state, in parts (agent_parts.h). The sampler, declared after the replay, stops
  // before the memory goes.
  CountersPart counters_;
  ExplorationPart exploration_;
  RandomPart random_;
  LearnerPart learning_;
  ReplayPart replay_part_;
  const std::array<AgentPart*, 5> parts_{&counters_, &exploration_, &random_, &learning_,
                                         &replay_part_};
  std::unique_ptr<BatchSampler> sampler_;
  std::vector<std::unique_ptr<ServerTransport>> servers_;  // Empty alone; in shard order.
  std::optional<LearnerModel> synced_model_;
  std::unique_ptr<ParameterServerSync> sync_;  // Null alone; after servers_: stops before they go.
  std::unique_ptr<MetricsLog> metrics_;
  std::unique_ptr<GpuMonitor> gpu_;

  std::vector<uint8_t> env_frame_, model_frame_, observation_;

  // The episode in progress.
  double episode_return_ = 0;
  int episode_length_ = 0;
  // The episode's steps by place on the map.
  std::array<int, sim::kRoadPlaces> episode_steps_at_{};
  // Steps per second over the last report_every, for the reports.
  std::optional<RateMeter> env_rate_, train_rate_;
  // The acting thread's time by phase (Run makes it); the split at the previous report.
  std::optional<PhaseClock> clock_;
  TimeSplit reported_split_;
  double reported_wall_s_ = 0;
  double process_cpu_at_start_ = 0;  // The process's CPU seconds when Run started.
  double loss_sum_ = 0, q_sum_ = 0;
  int loss_count_ = 0;
  const absl::Time created_;
  absl::Time first_minibatch_at_ = absl::InfinitePast();  // This start's first minibatch.
  absl::Time started_;
  absl::Time last_report_;
  absl::Time last_weights_save_;

  mutable absl::Mutex time_mu_;
  TimeSplit reported_time_ ABSL_GUARDED_BY(time_mu_);  // The split as of the latest report.
};

absl::Status Agent::Impl::Init() {
  CONVOY_RETURN_IF_ERROR(CheckAgentOptions(options_));
  CONVOY_ASSIGN_OR_RETURN(device_, ResolveDevice(options_.device));
  if (options_.torch_threads > 0) torch::set_num_threads(options_.torch_threads);

  CONVOY_ASSIGN_OR_RETURN(environment_, MakeEnvironment(options_.environment));
  std::vector<std::string> servers;  // --ps: the server, or the shards in order.
  CONVOY_RETURN_IF_ERROR(JoinOrGoAlone(&servers));
  CONVOY_ASSIGN_OR_RETURN(const ModelSpec spec, ResolveModel(options_.model));
  const std::array<int, 3> env_shape = environment_->env->observation_shape();
  if (spec.channels % env_shape[0] != 0) {
    return absl::InvalidArgumentError(absl::StrCat("model ", spec.name, " takes ", spec.channels,
                                                   " channels, not a stack of ", env_shape[0],
                                                   "-channel frames"));
  }
  const int frame_stack = spec.channels / env_shape[0];
  CONVOY_ASSIGN_OR_RETURN(preprocess_,
                          Preprocess::Create(env_shape, {env_shape[0], spec.height, spec.width}));
  CONVOY_ASSIGN_OR_RETURN(const LearnerOptions learner,
                          LearnerOptionsOf(options_, *environment_->env, device_));
  CONVOY_ASSIGN_OR_RETURN(learner_, DqnLearner::Create(learner));
  learner_->CopyOnlineToTarget();
  learning_.Attach([this] { return learner_->SaveState(); },
                   [this](const std::string& archive) { return learner_->LoadState(archive); });

  // Before the sync's first pull: a resumed learner's weights give way to the server's.
  CONVOY_RETURN_IF_ERROR(
      OpenReplay(ReplayOptionsOf(options_, preprocess_->output_shape(), frame_stack)));
  sampler_ = std::make_unique<BatchSampler>(
      replay(), options_.batch_size,
      std::max<size_t>(options_.min_replay_size, options_.batch_size), device_,
      options_.prefetch_batches);

  env_frame_.resize(environment_->env->observation_size());
  model_frame_.resize(preprocess_->output_size());
  observation_.resize(preprocess_->output_size() * frame_stack);
  LOG(INFO) << options_.agent_id << ": model " << spec.name << " ("
            << learner_->model().parameter_count << " parameters) on " << DescribeDevice(device_)
            << "; replay " << options_.replay_memory_size << " transitions, "
            << replay()->bytes_per_transition() << " bytes per transition; sim "
            << options_.environment.sim;

  if (device_.is_cuda()) gpu_ = GpuMonitor::Open(device_.index() < 0 ? 0 : device_.index());
  if (!options_.log_dir.empty()) {
    CONVOY_RETURN_IF_ERROR(OpenLogs());
  }

  if (!servers_.empty()) {
    synced_model_.emplace(learner_.get());
    sync_ = std::make_unique<ParameterServerSync>(ServerPointers(), &*synced_model_,
                                                  SyncOptionsOf(options_, std::move(servers)),
                                                  exploration_.epsilon());
  }
  return absl::OkStatus();
}

absl::Status Agent::Impl::JoinOrGoAlone(std::vector<std::string>* servers) {
  if (options_.ps_address.empty()) {
    ExplorationOptions exploration;
    exploration.min_epsilon = options_.min_epsilon;
    exploration.per_iter_epsilon_reduction = options_.per_iter_epsilon_reduction;
    exploration_.GoAlone(exploration);
    return absl::OkStatus();
  }
  // Joins and adopts the server's run settings before anything depends on them.
  CONVOY_ASSIGN_OR_RETURN(*servers, ParseServerList(options_.ps_address));
  CONVOY_ASSIGN_OR_RETURN(servers_,
                          CreateTransports(*servers, TransportOptionsOf(options_), observer_));
  CONVOY_ASSIGN_OR_RETURN(
      const JoinResult joined,
      JoinServers(ServerPointers(), environment_->env->num_actions(), JoinOptionsOf(options_)));
  CONVOY_RETURN_IF_ERROR(AdoptRunConfig(joined.config, &options_));
  exploration_.Set(joined.epsilon);
  return absl::OkStatus();
}

absl::Status Agent::Impl::OpenReplay(const ReplayOptions& replay) {
  std::optional<v1::AgentState> saved;
  CONVOY_RETURN_IF_ERROR(replay_part_.Open(replay, options_.replay_checkpoint_dir,
                                           options_.agent_id, options_.resume,
                                           options_.replay_checkpoint_every, created_, &saved));
  if (saved.has_value()) {
    const std::string& path = replay_part_.checkpointer()->path();
    CONVOY_RETURN_IF_ERROR(Restore(*saved, path));
    const AgentStats resumed = stats();
    LOG(INFO) << options_.agent_id << ": resumed from " << path << ": " << resumed.replay_size
              << " transitions, " << resumed.env_steps << " steps, " << resumed.episodes
              << " episodes";
  }
  return absl::OkStatus();
}

absl::Status Agent::Impl::Restore(const v1::AgentState& saved, const std::string& path) {
  if (saved.agent_id() != options_.agent_id || saved.model() != options_.model) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " is agent ", saved.agent_id(), "'s with model ", saved.model(),
                     "; this is agent ", options_.agent_id, " with model ", options_.model));
  }
  if (saved.seed() != options_.seed) {
    LOG(WARNING) << options_.agent_id << ": " << path
                 << " was saved by a run with --seed=" << saved.seed()
                 << "; going on with --seed=" << options_.seed;
  }
  for (AgentPart* part : parts_) CONVOY_RETURN_IF_ERROR(part->RestoreFrom(saved, path));
  return absl::OkStatus();
}

v1::AgentState Agent::Impl::CheckpointState() const {
  v1::AgentState state;
  state.set_agent_id(options_.agent_id);
  state.set_model(options_.model);
  state.set_seed(options_.seed);
  for (const AgentPart* part : parts_) part->SaveTo(state);
  return state;
}

absl::Status Agent::Impl::OpenLogs() {
  CONVOY_ASSIGN_OR_RETURN(metrics_, MetricsLog::Open(options_.log_dir));
  CONVOY_RETURN_IF_ERROR(metrics_->DeclareTable(
      "episodes",
      {"episode", "env_steps", "return", "length", "distance_m", "collision", "time_limit",
       "epsilon", "wall_s", "steps_corner", "steps_intersection", "end_place"},
      "env_steps"));
  return metrics_->DeclareTable(
      "intervals",
      {"wall_s", "env_steps", "train_steps", "episodes", "loss", "mean_q", "epsilon",
       "env_steps_per_s", "train_steps_per_s", "push_ms", "pull_ms", "staleness", "ps_version",
       "sampler_wait_s", "gpu_util_percent", "gpu_memory_mb",
       // The interval's time split (common/support/time_split.h): shares of the process's
       // CPU-seconds, the wait's of the wall time, and the cores the process kept busy.
       "cpu_env", "cpu_preprocess", "cpu_inference", "cpu_replay", "cpu_sampler", "cpu_train",
       "cpu_sync", "cpu_threads", "cpu_other", "wait_share", "cores_used"},
      "env_steps");
}

absl::Status Agent::Impl::ResetEpisode() {
  CONVOY_RETURN_IF_ERROR(
      environment_->env
          ->Reset(options_.seed * 1000003 + counters_.TakeEpisodeSeed(), env_frame_.data())
          .status());
  preprocess_->Apply(env_frame_.data(), model_frame_.data());
  replay()->StartEpisode(model_frame_.data());
  episode_return_ = 0;
  episode_length_ = 0;
  episode_steps_at_.fill(0);
  return absl::OkStatus();
}

absl::Status Agent::Impl::ReconnectSimulator() {
  counters_.SimulatorLost();
  Backoff backoff;
  while (true) {
    absl::StatusOr<std::unique_ptr<Environment>> environment =
        MakeEnvironment(options_.environment);
    if (environment.ok()) {
      environment_ = *std::move(environment);
      LOG(INFO) << options_.agent_id << ": simulator reconnected; restarting the episode";
      return ResetEpisode();
    }
    if (backoff.attempts() >= 30) return environment.status();
    absl::SleepFor(backoff.NextDelay());
  }
}

int Agent::Impl::ChooseAction() {
  const int actions = environment_->env->num_actions();
  const bool filling =
      options_.fill_with_random_actions && replay()->size() < options_.min_replay_size;
  std::mt19937_64& rng = random_.engine();
  if (filling || std::uniform_real_distribution<double>(0, 1)(rng) < exploration_.epsilon()) {
    return std::uniform_int_distribution<int>(0, actions - 1)(rng);
  }
  replay()->CurrentObservation(observation_.data());
  return learner_->GreedyAction(observation_.data());
}

absl::Status Agent::Impl::Run(const std::atomic<bool>& stop) {
  started_ = last_report_ = last_weights_save_ = absl::Now();
  const absl::Duration rate_window = std::max(options_.report_every, absl::Milliseconds(1));
  env_rate_.emplace(rate_window, started_);
  train_rate_.emplace(rate_window, started_);
  clock_.emplace();
  process_cpu_at_start_ = ProcessCpuSeconds();
  if (absl::Status s = ResetEpisode(); !s.ok()) return s;
  Lap(AgentPhase::kEnvironment);
  while (!stop.load()) {
    if (options_.max_steps > 0 && counters_.env_steps() >= options_.max_steps) break;
    if (options_.max_time > absl::ZeroDuration() && absl::Now() - started_ >= options_.max_time)
      break;
    CONVOY_RETURN_IF_ERROR(ActOnce(stop));
  }
  // The minibatches the replay ratio owes to the last steps; then the last sync.
  if (absl::Status s = TrainOnCredit(stop, /*drain=*/true); !s.ok()) return s;
  if (sync_ != nullptr) {
    sync_->FinalSync();
    exploration_.Set(sync_->epsilon());
  }
  sampler_->Stop();
  Report(true);
  if (!options_.log_dir.empty()) SaveWeights();
  if (ReplayCheckpointer* checkpointer = replay_part_.checkpointer(); checkpointer != nullptr) {
    // The episode in progress is in it too: a resumed agent ends it as cut by a time limit.
    CONVOY_RETURN_IF_ERROR(checkpointer->SaveNow(CheckpointState()));
  }
  return absl::OkStatus();
}

absl::Status Agent::Impl::ActOnce(const std::atomic<bool>& stop) {
  Lap(AgentPhase::kOther);
  const int action = ChooseAction();
  Lap(AgentPhase::kInference);
  absl::StatusOr<sim::StepResult> step = environment_->env->Step(action, env_frame_.data());
  Lap(AgentPhase::kEnvironment);
  if (!step.ok()) {
    if (options_.environment.sim.kind == SimKind::kEmbedded) return step.status();
    LOG(WARNING) << options_.agent_id << ": simulator call failed (" << step.status()
                 << "); reconnecting";
    return ReconnectSimulator();
  }
  preprocess_->Apply(env_frame_.data(), model_frame_.data());
  Lap(AgentPhase::kPreprocess);
  // A time limit or a driven route is not a true end: the last transition still bootstraps from
  // its next state.
  const bool terminal = step->done && !sim::IsTruncation(step->reason);
  replay()->Add(action, step->reward, terminal, model_frame_.data());
  Lap(AgentPhase::kReplay);
  episode_return_ += step->reward;
  ++episode_length_;
  ++episode_steps_at_[static_cast<int>(
      environment_->env->map().PlaceOf({step->car.x, step->car.y}))];
  counters_.StepTaken();
  env_rate_->Record(1);
  if (step->done) {
    EndEpisode(*step);
    Lap(AgentPhase::kOther);
    if (absl::Status s = ResetEpisode(); !s.ok()) {
      if (options_.environment.sim.kind == SimKind::kEmbedded) return s;
      if (absl::Status r = ReconnectSimulator(); !r.ok()) return r;
    }
    Lap(AgentPhase::kEnvironment);
  }
  if (replay()->size() >= std::max<size_t>(options_.min_replay_size, options_.batch_size)) {
    // The replay ratio's minibatches owed.
    learning_.Owe(options_.replay_ratio / options_.batch_size);
    if (absl::Status s = TrainOnCredit(stop, /*drain=*/false); !s.ok()) return s;
  }
  Lap(AgentPhase::kOther);
  PollSession();
  Lap(AgentPhase::kSync);
  if (absl::Now() - last_report_ >= options_.report_every) Report(false);
  if (!options_.log_dir.empty() && absl::Now() - last_weights_save_ >= kWeightsEvery) {
    SaveWeights();
  }
  if (ReplayCheckpointer* checkpointer = replay_part_.checkpointer();
      checkpointer != nullptr && checkpointer->Due(absl::Now())) {
    checkpointer->Start(CheckpointState(), absl::Now());
  }
  return absl::OkStatus();
}

absl::Status Agent::Impl::TrainOnCredit(const std::atomic<bool>& stop, bool drain) {
  // While training waits for the server, acting goes on until it is one sync's worth of minibatches
  // ahead of the replay ratio; then the loop waits too (as Reverb's rate limiters block inserts),
  // but never past the exchange being sync_wait old: then the agent is out of step and learns
  // locally. Credit that accrued meanwhile is repaid a few minibatches per environment step, so an
  // answer does not set off a burst of training that stops acting.
  const double ahead = static_cast<double>(options_.batch_update_frequency);
  const double per_step = options_.replay_ratio / options_.batch_size;
  int budget = drain ? INT_MAX : 2 * static_cast<int>(std::ceil(per_step));
  while (learning_.credit() >= 1.0 && budget > 0 && !stop.load()) {
    if (sync_ != nullptr && sync_->TrainingWaits()) {
      if (!drain && learning_.credit() < ahead) return absl::OkStatus();  // Acting goes on.
      Lap(AgentPhase::kOther);
      sync_->WaitForAnswer();
      Lap(AgentPhase::kWait);
      PollSession();
      Lap(AgentPhase::kSync);
      continue;  // Answered, or now out of step.
    }
    if (absl::Status s = TrainOne(); !s.ok()) return s;
    learning_.Repay();
    --budget;
    PollSession();
    Lap(AgentPhase::kSync);
  }
  return absl::OkStatus();
}

absl::Status Agent::Impl::TrainOne() {
  Lap(AgentPhase::kOther);
  absl::StatusOr<TensorBatch> batch = sampler_->Next(kSamplerTimeout);
  Lap(AgentPhase::kWait);
  if (!batch.ok()) return batch.status();
  const TrainStats stats =
      learner_->Accumulate(batch->observations, batch->next_observations, batch->actions,
                           batch->returns, batch->discounts, batch->weights);
  Lap(AgentPhase::kTrain);
  if (options_.prioritized) {
    replay()->UpdatePriorities(batch->ids.data(), stats.td_errors.data(), batch->ids.size());
  }
  Lap(AgentPhase::kReplay);
  loss_sum_ += stats.loss;
  q_sum_ += stats.mean_q;
  ++loss_count_;
  learning_.MinibatchTrained();
  const uint64_t minibatches = learning_.minibatches();
  if (first_minibatch_at_ == absl::InfinitePast()) first_minibatch_at_ = absl::Now();
  // Logged before the sync may hand it to a push: a push log never has more pushed than trained.
  if (observer_ != nullptr) observer_->Trained(options_.agent_id, minibatches);
  train_rate_->Record(1);
  // This process's first minibatch: how long its start took to train (what a resume saves).
  const double first_train_seconds =
      minibatches == 1 ? absl::ToDoubleSeconds(absl::Now() - created_) : 0;
  counters_.Trained(static_cast<uint64_t>(batch->actions.size(0)), first_train_seconds);
  if (first_train_seconds > 0) {
    LOG(INFO) << options_.agent_id << ": first minibatch " << first_train_seconds
              << " s after the start, with " << replay()->size() << " transitions";
  }
  Lap(AgentPhase::kOther);
  if (sync_ != nullptr) {
    sync_->Trained();  // Steps locally and syncs as the push mode and the sync's state say.
  } else {
    // Alone, the local optimizer steps every minibatch, at the rate the run's schedule gives after
    // the minibatches trained before this one (as the server's does); the fall over minutes runs
    // on this start's clock from its first minibatch.
    learner_->SetLearningRateScale(
        options_.learning_rate_decay_minutes > 0
            ? LearningRateScaleOverTime(absl::Now() - first_minibatch_at_,
                                        absl::Minutes(options_.learning_rate_decay_minutes),
                                        options_.final_learning_rate_scale)
            : LearningRateScale(minibatches - 1, options_.learning_rate_decay_minibatches,
                                options_.final_learning_rate_scale));
    learner_->StepLocal();
    if (minibatches % options_.batch_update_frequency == 0) SyncAlone();
  }
  Lap(AgentPhase::kSync);
  return absl::OkStatus();
}

void Agent::Impl::PollSession() {
  if (sync_ == nullptr) return;
  sync_->Poll();
  exploration_.Set(sync_->epsilon());
}

void Agent::Impl::SyncAlone() {
  if (learning_.TargetRefreshDue(options_.target_update_frequency)) {
    learner_->MoveTargetTowardOnline(options_.target_update_tau);
    learning_.TargetRefreshed();
  }
  exploration_.OnUpdateApplied();
}

void Agent::Impl::EndEpisode(const sim::StepResult& last) {
  const CountersPart::EpisodeEnd ended = counters_.EpisodeEnded(episode_return_);
  if (metrics_ != nullptr) {
    absl::Status s = metrics_->Append(
        "episodes",
        {static_cast<double>(ended.episodes), static_cast<double>(ended.env_steps), episode_return_,
         static_cast<double>(episode_length_), last.car.distance_driven_m,
         last.reason == sim::TerminationReason::kCollision ? 1.0 : 0.0,
         sim::IsSuccess(last.reason, environment_->env->options()) ? 1.0 : 0.0,
         exploration_.epsilon(), absl::ToDoubleSeconds(absl::Now() - started_),
         static_cast<double>(episode_steps_at_[static_cast<int>(sim::RoadPlace::kCorner)]),
         static_cast<double>(episode_steps_at_[static_cast<int>(sim::RoadPlace::kIntersection)]),
         static_cast<double>(environment_->env->map().PlaceOf({last.car.x, last.car.y}))});
    if (!s.ok()) LOG(WARNING) << "metrics: " << s;
  }
}

Agent::Impl::Interval Agent::Impl::TakeInterval() {
  Interval r;
  r.now = absl::Now();
  r.stats = stats();
  r.env_sps = env_rate_->PerSecond(r.now);
  r.train_sps = train_rate_->PerSecond(r.now);
  last_report_ = r.now;
  r.loss = loss_count_ > 0 ? loss_sum_ / loss_count_ : 0;
  r.mean_q = loss_count_ > 0 ? q_sum_ / loss_count_ : 0;
  r.exchanges = sync_ != nullptr ? sync_->TakeExchangeTimes() : ExchangeTimes{};
  loss_sum_ = q_sum_ = 0;
  loss_count_ = 0;
  r.ps_version = sync_ != nullptr ? sync_->version() : 0;
  if (gpu_ != nullptr) {
    absl::StatusOr<GpuSample> sample = gpu_->Sample();
    if (sample.ok()) {
      r.gpu_util = sample->utilisation_percent;
      r.gpu_mb = sample->memory_used_bytes / 1048576.0;
    }
  }
  r.split = TimeSplitNow();
  r.wall_s = absl::ToDoubleSeconds(r.now - started_);
  r.interval = r.split - reported_split_;
  r.interval_wall = r.wall_s - reported_wall_s_;
  reported_split_ = r.split;
  reported_wall_s_ = r.wall_s;
  return r;
}

void Agent::Impl::Report(bool final) {
  const Interval r = TakeInterval();
  {
    absl::MutexLock lock(&time_mu_);
    reported_time_ = r.split;
  }
  PrintReport(r, final);
  if (options_.machine_progress) {
    ProgressRecord progress;
    progress.agent = options_.agent_id;
    progress.episodes = r.stats.episodes;
    progress.env_steps = r.stats.env_steps;
    progress.train_steps = r.stats.train_steps;
    progress.avg_return = r.stats.average_return;
    progress.env_sps = r.env_sps;
    progress.train_sps = r.train_sps;
    progress.epsilon = r.stats.epsilon;
    progress.loss = r.loss;
    progress.version = r.ps_version;
    progress.connected = sync_ == nullptr || sync_->state() == SyncState::kInStep;
    progress.wall_s = r.wall_s;
    progress.time = r.split;
    std::printf("%s\n", FormatProgress(progress).c_str());
    std::fflush(stdout);
  }
  if (metrics_ != nullptr) AppendInterval(r);
}

void Agent::Impl::PrintReport(const Interval& r, bool final) const {
  const AgentStats& s = r.stats;
  std::string left;
  if (options_.max_time > absl::ZeroDuration()) {
    const absl::Duration remaining =
        std::max(absl::ZeroDuration(), options_.max_time - (r.now - started_));
    left = absl::StrFormat(", %.0fs left", absl::ToDoubleSeconds(remaining));
  } else if (options_.max_steps > 0) {
    left = absl::StrFormat(", %d steps left",
                           options_.max_steps > s.env_steps ? options_.max_steps - s.env_steps : 0);
  }
  std::fprintf(
      stderr,
      "[%s] %s%llu episodes, %llu steps, avg return %.1f, %.0f env steps/s, %.1f train "
      "steps/s, loss %.4f, eps %.2f%s%s; cpu: %s\n",
      options_.agent_id.c_str(), final ? "done: " : "", static_cast<unsigned long long>(s.episodes),
      static_cast<unsigned long long>(s.env_steps), s.average_return, r.env_sps, r.train_sps,
      r.loss, s.epsilon, sync_ != nullptr ? absl::StrCat(", ", sync_->Describe()).c_str() : "",
      left.c_str(), FormatTimeShares(r.interval, r.interval_wall).c_str());
}

void Agent::Impl::AppendInterval(const Interval& r) {
  const TimeSplit& interval = r.interval;
  auto cpu_share = [&interval](double seconds) {
    return interval.process_cpu > 0 ? seconds / interval.process_cpu : 0;
  };
  absl::Status st = metrics_->Append(
      "intervals", {r.wall_s,
                    static_cast<double>(r.stats.env_steps),
                    static_cast<double>(r.stats.train_steps),
                    static_cast<double>(r.stats.episodes),
                    r.loss,
                    r.mean_q,
                    r.stats.epsilon,
                    r.env_sps,
                    r.train_sps,
                    r.exchanges.push_ms,
                    r.exchanges.pull_ms,
                    static_cast<double>(sync_ != nullptr ? sync_->last_staleness() : 0),
                    static_cast<double>(r.ps_version),
                    sampler_->learner_wait_seconds(),
                    r.gpu_util,
                    r.gpu_mb,
                    cpu_share(interval[AgentPhase::kEnvironment]),
                    cpu_share(interval[AgentPhase::kPreprocess]),
                    cpu_share(interval[AgentPhase::kInference]),
                    cpu_share(interval[AgentPhase::kReplay]),
                    cpu_share(interval.sampler_cpu),
                    cpu_share(interval[AgentPhase::kTrain]),
                    cpu_share(interval[AgentPhase::kSync]),
                    cpu_share(interval.other_threads_cpu()),
                    cpu_share(interval[AgentPhase::kOther]),
                    r.interval_wall > 0 ? interval[AgentPhase::kWait] / r.interval_wall : 0,
                    r.interval_wall > 0 ? interval.process_cpu / r.interval_wall : 0});
  if (!st.ok()) LOG(WARNING) << "metrics: " << st;
}

TimeSplit Agent::Impl::TimeSplitNow() const {
  TimeSplit split = clock_.has_value() ? clock_->split() : TimeSplit{};
  split.sampler_cpu = sampler_ != nullptr ? sampler_->cpu_seconds() : 0;
  split.process_cpu = ProcessCpuSeconds() - process_cpu_at_start_;
  return split;
}

void Agent::Impl::SaveWeights() {
  last_weights_save_ = absl::Now();
  std::vector<float> flat;
  learner_->GetWeights(&flat);
  absl::Status s = WriteWeightsFile(absl::StrCat(options_.log_dir, "/weights.pt"), flat.data(),
                                    learner_->model().layout);
  if (!s.ok()) LOG(WARNING) << options_.agent_id << ": " << s;
}

Agent::Agent(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Agent::~Agent() = default;

absl::StatusOr<std::unique_ptr<Agent>> Agent::Create(const AgentOptions& options,
                                                     std::shared_ptr<SyncObserver> observer) {
  auto impl = std::make_unique<Impl>(options, std::move(observer));
  if (absl::Status s = impl->Init(); !s.ok()) return s;
  return std::unique_ptr<Agent>(new Agent(std::move(impl)));
}

absl::Status Agent::Run(const std::atomic<bool>& stop) { return impl_->Run(stop); }
AgentStats Agent::stats() const { return impl_->stats(); }
const AgentOptions& Agent::options() const { return impl_->options(); }
std::vector<float> Agent::Weights() const { return impl_->Weights(); }

}  // namespace convoy::agent
