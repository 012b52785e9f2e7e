#include "param_server/parameter_server.h"

#include <glog/logging.h>

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "common/flag_ranges.h"
#include "common/init.h"
#include "common/status_macros.h"
#include "common/tensor_encoding.h"

namespace convoy {
namespace {

// Pushes per second are measured over this trailing window.
constexpr absl::Duration kRateWindow = absl::Seconds(10);

uint64_t NewIncarnation() {
  absl::BitGen rng;
  return absl::Uniform<uint64_t>(absl::IntervalClosed, rng, 1, UINT64_MAX);
}

std::map<std::string, std::string> HyperparametersOf(const ParameterServerOptions& o) {
  const OptimizerOptions& opt = o.optimizer;
  std::map<std::string, std::string> hyperparameters = {
      {"optimizer", std::string(OptimizerName(opt.kind))},
      {"learning_rate", absl::StrCat(opt.learning_rate)},
      {"beta1", absl::StrCat(opt.beta1)},
      {"beta2", absl::StrCat(opt.beta2)},
      {"eps", absl::StrCat(opt.eps)},
      {"weight_decay", absl::StrCat(opt.weight_decay)},
      {"momentum", absl::StrCat(opt.momentum)},
      {"max_grad_norm", absl::StrCat(opt.max_grad_norm)},
      {"max_staleness", absl::StrCat(o.max_staleness)},
      {"staleness_lr_scaling", o.staleness_lr_scaling ? "true" : "false"},
      {"average_horizon", absl::StrCat(o.average_horizon)},
      {"exploration", ExplorationModeName(o.exploration.mode)},
      {"min_epsilon", absl::StrCat(o.exploration.min_epsilon)},
      {"per_iter_epsilon_reduction", absl::StrCat(o.exploration.per_iter_epsilon_reduction)},
      {"seed", absl::StrCat(o.seed)},
  };
  for (auto& [name, value] : RunSettingValues(o)) hyperparameters.emplace(name, value);
  return hyperparameters;
}

// The optimizer's state in a checkpoint: its bytes and the optimizer that wrote them.
absl::Status SaveOptimizerTo(const FlatOptimizer& optimizer, Optimizer kind, CheckpointData& data) {
  CONVOY_ASSIGN_OR_RETURN(data.optimizer_state, optimizer.SaveState());
  data.manifest.set_optimizer(std::string(OptimizerName(kind)));
  return absl::OkStatus();
}

// Continues the optimizer state `checkpoint` holds; state of another optimizer is dropped with a
// warning, and the optimizer starts fresh. Errors: DATA_LOSS when the state does not fit.
absl::Status RestoreOptimizer(const LoadedCheckpoint& checkpoint, Optimizer kind,
                              FlatOptimizer& optimizer) {
  if (checkpoint.manifest.optimizer() != OptimizerName(kind)) {
    LOG(WARNING) << "checkpoint " << checkpoint.path << " was written with optimizer '"
                 << checkpoint.manifest.optimizer() << "'; starting '" << OptimizerName(kind)
                 << "' with fresh state";
    return absl::OkStatus();
  }
  if (absl::Status s = optimizer.RestoreState(checkpoint.optimizer_state); !s.ok()) {
    return absl::DataLossError(absl::StrCat(checkpoint.path, ": ", s.message()));
  }
  return absl::OkStatus();
}

}  // namespace

void ParameterServer::Counters::SaveTo(v1::CheckpointManifest& manifest) const {
  manifest.set_updates_applied(updates_applied);
  manifest.set_applied_minibatches(applied_minibatches);
  for (const auto& [reason, count] : rejections) {
    (*manifest.mutable_rejections())[v1::RejectReason_Name(reason)] = count;
  }
}

void ParameterServer::Counters::Restore(const v1::CheckpointManifest& manifest) {
  updates_applied = manifest.updates_applied();
  applied_minibatches = manifest.applied_minibatches();
  for (const auto& [name, count] : manifest.rejections()) {
    v1::RejectReason reason;
    if (v1::RejectReason_Parse(name, &reason)) rejections[reason] = count;
  }
}

absl::StatusOr<std::unique_ptr<ParameterServer>> ParameterServer::Create(
    const ParameterServerOptions& options) {
  CONVOY_RETURN_IF_ERROR(ValidateOptimizerOptions(options.optimizer));
  CONVOY_RETURN_IF_ERROR(ValidateExplorationOptions(options.exploration));
  // The run settings' ranges are the table's (common/run_settings.h), as convoy_ps's flags check
  // them.
  CONVOY_RETURN_IF_ERROR(CheckFlagRanges(RunSettingRanges(options)));
  if (options.average_horizon > 0 && options.average_every <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("average_every must be positive when averaging is on");
  }
  if (options.resume && options.checkpoint_dir.empty()) {
    return absl::InvalidArgumentError("--resume needs --checkpoint_dir");
  }
  if (!options.checkpoint_dir.empty() && !options.resume) {
    // Another run's checkpoints: refused before anything is read or written.
    CONVOY_RETURN_IF_ERROR(Checkpointer::CheckUnused(options.checkpoint_dir));
  }
  CONVOY_ASSIGN_OR_RETURN(ModelInfo model, DescribeModel(options.model, options.num_actions));
  CONVOY_ASSIGN_OR_RETURN(ShardMap map, MakeShardMap(model, options.num_shards));
  if (options.shard_index >= options.num_shards) {
    return absl::InvalidArgumentError(absl::StrCat("--shard_index must be below --num_shards (",
                                                   options.num_shards, "), got ",
                                                   options.shard_index));
  }
  KeepLargeAllocationsInHeap();  // Also when embedded in a test or benchmark.
  std::unique_ptr<ParameterServer> server(
      new ParameterServer(options, std::move(model), std::move(map)));
  CONVOY_RETURN_IF_ERROR(server->Initialise());
  return server;
}

ParameterServer::ParameterServer(const ParameterServerOptions& options, ModelInfo full_model,
                                 ShardMap map)
    : options_(options),
      full_model_(std::move(full_model)),
      shard_map_(std::move(map)),
      model_(ShardModel(full_model_, shard_map_, options.shard_index)),
      incarnation_(NewIncarnation()),
      started_(absl::Now()),
      staleness_(options.max_staleness, options.staleness_lr_scaling),
      target_(options.target_update_frequency),
      apply_rate_(kRateWindow, started_),
      checkpoint_trigger_(options.checkpoint_every_updates, options.checkpoint_every) {}

ParameterServer::~ParameterServer() {
  std::unique_ptr<PeriodicTask> average_task;
  {
    absl::MutexLock lock(&loop_mu_);
    average_task = std::move(average_task_);
  }
  average_task.reset();
  // Before any member the checkpoint reads goes: stopping waits for a checkpoint in progress.
  checkpoint_trigger_.Stop();
}

absl::Status ParameterServer::Initialise() {
  if (!options_.checkpoint_dir.empty()) {
    checkpointer_ =
        std::make_unique<Checkpointer>(options_.checkpoint_dir, options_.keep_checkpoints, model_);
    checkpointer_->set_shard(shard_info());
  }

  std::optional<LoadedCheckpoint> resumed;
  std::vector<float> initial;
  if (options_.resume) {
    absl::StatusOr<LoadedCheckpoint> loaded = checkpointer_->LoadNewest();
    if (loaded.ok()) {
      resumed = *std::move(loaded);
      checkpointer_->AdoptRun(resumed->manifest);
    } else if (loaded.status().code() == absl::StatusCode::kFailedPrecondition) {
      return loaded.status();
    } else {
      LOG(WARNING) << "--resume: " << loaded.status().message() << "; starting fresh";
    }
  }
  if (resumed) {
    initial = resumed->weights;
  } else if (!options_.init_checkpoint.empty()) {
    // The whole model (one checkpoint, or a sharded run's set, assembled): this shard takes its
    // slice, so a run can start again with another number of shards.
    CONVOY_ASSIGN_OR_RETURN(LoadedCheckpoint loaded,
                            Checkpointer::LoadWholeModel(options_.init_checkpoint, full_model_));
    initial = std::move(loaded.weights);
    LOG(INFO) << "initial weights from " << options_.init_checkpoint;
  } else {
    CONVOY_ASSIGN_OR_RETURN(
        initial, InitialFlatWeights(options_.model, options_.num_actions, options_.seed));
  }
  if (!resumed && shard_map_.num_shards() > 1) {
    const ShardRange& range = shard_map_.ranges[options_.shard_index];
    initial = std::vector<float>(initial.begin() + range.begin, initial.begin() + range.end);
  }

  const uint64_t version = resumed ? resumed->manifest.version() : 0;
  const uint64_t checkpoint_writer = resumed ? Lineage::WriterOf(resumed->manifest) : 0;
  if (!options_.apply_log.empty()) {
    CONVOY_ASSIGN_OR_RETURN(apply_log_, ApplyLog::Open(options_.apply_log));
    apply_log_->Started(incarnation_, version, checkpoint_writer);
    hooks_.push_back(apply_log_.get());
  }
  // With both triggers off it has nothing to count: no lock of its own on the apply path.
  if (checkpointer_ != nullptr && checkpoint_trigger_.enabled()) {
    hooks_.push_back(&checkpoint_trigger_);
  }
  run_id_ = checkpointer_ != nullptr ? checkpointer_->run_id() : Checkpointer::NewRunId();
  lineage_.Start(incarnation_, version);
  if (resumed) {
    absl::MutexLock writer(&checkpoint_mu_);
    checkpointed_version_ = version;
    checkpointed_path_ = resumed->path;
    status_checkpoint_version_.store(version);
    status_checkpoint_unix_ms_.store(absl::ToUnixMillis(absl::Now()));
  }
  absl::MutexLock lock(&apply_mu_);
  store_ = std::make_unique<WeightStore>(std::move(initial), version);
  CONVOY_ASSIGN_OR_RETURN(
      optimizer_,
      FlatOptimizer::Create(options_.optimizer, store_->mutable_master(), store_->size()));
  exploration_ = std::make_unique<ExplorationSchedule>(options_.exploration);

  absl::MutexLock stats(&stats_mu_);
  if (resumed) {
    CONVOY_RETURN_IF_ERROR(RestoreOptimizer(*resumed, options_.optimizer.kind, *optimizer_));
    exploration_->set_global_epsilon(resumed->manifest.epsilon());
    target_.Restore(resumed->manifest, std::move(resumed->target));
    counters_.Restore(resumed->manifest);
    dedup_.Restore(resumed->manifest);
    if (!lineage_.Restore(resumed->manifest)) {
      LOG(WARNING)
          << "checkpoint " << resumed->path
          << " holds no exactly-once records or lineage (written before they were "
             "checkpointed): pushes sent before this restart are not recognised as repeats, "
             "and those computed on an earlier start's weights are refused";
    }
    // Starts killed before a checkpoint of their own served the version they resumed at; the
    // journal names them, and this start joins it before it serves.
    lineage_.AddResumedStarts(checkpointer_->ResumedStarts());
    if (absl::Status s =
            checkpointer_->RecordResumedStart({incarnation_, version, checkpoint_writer});
        !s.ok()) {
      LOG(WARNING) << s
                   << ": if this start is killed before its first checkpoint, pushes computed "
                      "on its weights are refused after the next restart";
    }
    // "resumed from ... at version N" ends the line: scripts and tests read the version there.
    LOG(INFO) << "resumed from " << resumed->path << " (run " << run_id_ << ") at version "
              << version;
  } else {
    target_.Start(store_->Snapshot());
  }
  counters_.epsilon = exploration_->global_epsilon();
  if (options_.average_horizon == 0) return absl::OkStatus();
  absl::MutexLock average(&average_mu_);
  average_ = std::make_unique<WeightAverage>(options_.average_horizon, store_->Snapshot()->values,
                                             version, counters_.applied_minibatches);
  if (resumed && !resumed->average.empty()) {
    if (absl::Status s = average_->Restore(resumed->manifest, std::move(resumed->average));
        !s.ok()) {
      return absl::DataLossError(absl::StrCat(resumed->path, ": ", s.message()));
    }
  } else if (resumed) {
    LOG(WARNING) << "checkpoint " << resumed->path
                 << " holds no averaged network; the average starts again from its weights";
  }
  return absl::OkStatus();
}

v1::RunConfig ParameterServer::RunConfigFor(uint32_t agent_index) const {
  v1::RunConfig config;
  config.set_model_name(options_.model);
  config.set_num_actions(static_cast<uint32_t>(options_.num_actions));
  config.set_optimizer(std::string(OptimizerName(options_.optimizer.kind)));
  config.set_learning_rate(options_.optimizer.learning_rate);
  config.set_update_rule(options_.optimizer.kind == Optimizer::kDelta ? "delta" : "gradients");
  config.set_max_staleness(options_.max_staleness < 0 ? 0 : options_.max_staleness);
  switch (options_.exploration.mode) {
    case ExplorationMode::kGlobal:
      config.set_exploration(v1::EXPLORATION_GLOBAL);
      break;
    case ExplorationMode::kApex:
      config.set_exploration(v1::EXPLORATION_APEX);
      break;
  }
  {
    absl::MutexLock lock(&apply_mu_);
    config.set_epsilon(exploration_->EpsilonFor(agent_index));
  }
  config.set_min_epsilon(options_.exploration.min_epsilon);
  config.set_per_iter_epsilon_reduction(options_.exploration.per_iter_epsilon_reduction);
  config.set_max_chunk_bytes(static_cast<uint32_t>(kMaxChunkPayloadBytes));
  config.set_seed(options_.seed);
  FillRunConfig(options_, &config);  // The run settings' table.
  return config;
}

v1::ShardInfo ParameterServer::shard_info() const {
  return ShardInfoOf(shard_map_, options_.shard_index, full_model_);
}

absl::StatusOr<v1::JoinResponse> ParameterServer::Join(const v1::JoinRequest& request) {
  if (request.model_fingerprint() != model_.fingerprint) {
    CountRejection(request.agent_id(), v1::REJECT_REASON_FINGERPRINT_MISMATCH);
    return absl::FailedPreconditionError(
        absl::StrCat("model fingerprint mismatch: agent has '",
                     request.model_fingerprint().empty() ? "(none)" : request.model_fingerprint(),
                     "', server has '", model_.fingerprint, "'"));
  }
  if (request.agent_id().empty()) return absl::InvalidArgumentError("agent_id must not be empty");
  // An agent that knows no shards (0) must be talking to a whole model.
  const uint32_t expected_shards = std::max<uint32_t>(request.num_shards(), 1);
  if (expected_shards != shard_map_.num_shards() || request.shard_index() != options_.shard_index ||
      (!request.shard_map_digest().empty() && request.shard_map_digest() != shard_map_.digest)) {
    CountRejection(request.agent_id(), v1::REJECT_REASON_SHARD_MISMATCH);
    return absl::FailedPreconditionError(absl::StrCat(
        "shard mismatch: the agent takes this server for shard ", request.shard_index(), " of ",
        expected_shards,
        request.shard_map_digest().empty()
            ? ""
            : absl::StrCat(" (map ", request.shard_map_digest(), ")"),
        ", it is ", DescribeShard(shard_map_, options_.shard_index),
        ": list the servers in --ps in shard order, all started with the same --num_shards"));
  }
  v1::JoinResponse response;
  *response.mutable_config() = RunConfigFor(request.agent_index());
  response.set_version(store_->version());
  response.set_parameter_count(model_.parameter_count);
  response.set_model_fingerprint(model_.fingerprint);
  response.set_incarnation(incarnation_);
  *response.mutable_shard() = shard_info();
  {
    absl::MutexLock lock(&stats_mu_);
    agents_.Joined(request.agent_id(), request.hostname(), request.agent_index());
    response.set_target_version(target_.version());
  }
  LOG(INFO) << "agent " << request.agent_id() << " (index " << request.agent_index()
            << ") joined from " << request.hostname();
  return response;
}

PushOutcome ParameterServer::Apply(const std::string& agent_id, uint64_t base_version,
                                   uint32_t minibatch_count, std::vector<float>& values) {
  PushHeader header;
  header.agent_id = agent_id;
  header.base_version = base_version;
  header.minibatch_count = minibatch_count;
  return Apply(header, values);
}

PushOutcome ParameterServer::Apply(const PushHeader& header, std::vector<float>& values) {
  const std::string& agent_id = header.agent_id;
  const uint32_t minibatch_count = header.minibatch_count;
  PushOutcome outcome;
  std::optional<AppliedPush> applied;
  const uint32_t agent_index = agents_.Seen(agent_id);
  {
    absl::MutexLock lock(&apply_mu_);
    // Repeat detection and the apply are one step under the writer's lock, so two attempts of one
    // push that arrive together still apply once.
    const PushDeduplicator::Seen seen =
        dedup_.Check(agent_id, header.push_session, header.sequence);
    if (seen.verdict != PushDeduplicator::Verdict::kNew) {
      PushOutcome again = seen.answer;
      if (seen.verdict == PushDeduplicator::Verdict::kSuperseded) {
        again.reason = v1::REJECT_REASON_SUPERSEDED;
        again.version = store_->version();
        again.incarnation = incarnation_;
        again.epsilon = exploration_->EpsilonFor(agent_index);
      }
      again.repeated = true;
      absl::MutexLock stats(&stats_mu_);
      ++counters_.repeated_pushes;
      if (!again.accepted) ++counters_.rejections[again.reason];
      again.target_version = target_.version();
      return again;
    }
    if (header.base_incarnation != 0 && header.base_incarnation != incarnation_ &&
        !lineage_.HoldsEarlier(header.base_incarnation, header.base_version)) {
      // Computed on weights these never were: versions a killed start applied after its last
      // checkpoint, or another run's. Their numbers say nothing about staleness here.
      outcome.reason = v1::REJECT_REASON_BASE_NOT_IN_LINEAGE;
    } else {
      // This start's version, or one of the lineage's (at most the version this start resumed at):
      // either way a version of these weights, as stale as the versions applied since.
      const StalenessDecision decision = staleness_.Decide(store_->version(), header.base_version);
      outcome.staleness = decision.staleness;
      if (decision.kind == StalenessDecision::Kind::kApply) {
        optimizer_->Apply(values.data(), decision.lr_scale);
        const uint64_t version = store_->version() + 1;
        applied =
            AppliedPush{incarnation_,    version,         agent_id,          header.push_session,
                        header.sequence, minibatch_count, decision.staleness};
        for (ApplyHook* hook : hooks_) hook->Applied(*applied);
        exploration_->OnUpdateApplied();
        store_->Publish(version);
        outcome.accepted = true;
      } else {
        outcome.reason = decision.kind == StalenessDecision::Kind::kRejectStale
                             ? v1::REJECT_REASON_STALE
                             : v1::REJECT_REASON_AHEAD;
      }
    }
    outcome.version = store_->version();
    outcome.incarnation = incarnation_;
    outcome.epsilon = exploration_->EpsilonFor(agent_index);
    dedup_.Record(agent_id, header.push_session, header.sequence, outcome);

    absl::MutexLock stats(&stats_mu_);
    agents_.Answered(agent_id, outcome);
    if (outcome.accepted) {
      ++counters_.updates_applied;
      counters_.applied_minibatches += minibatch_count;
      counters_.epsilon = exploration_->global_epsilon();
      target_.OnApplied(counters_.applied_minibatches, *store_);
      apply_rate_.Record(1);
    } else {
      ++counters_.rejections[outcome.reason];
    }
    outcome.target_version = target_.version();
  }
  if (applied) {
    for (ApplyHook* hook : hooks_) hook->AfterApply(*applied);
  }
  return outcome;
}

std::shared_ptr<const WeightSnapshot> ParameterServer::Snapshot(v1::Network network) const {
  if (network == v1::NETWORK_TARGET) {
    return target_.Snapshot();
  }
  if (network == v1::NETWORK_AVERAGE) {
    absl::MutexLock lock(&average_mu_);
    return average_ != nullptr ? average_->Snapshot() : nullptr;
  }
  return store_->Snapshot();
}

bool ParameterServer::FoldAverage() {
  if (options_.average_horizon == 0) return false;
  std::shared_ptr<const WeightSnapshot> weights;
  uint64_t applied_minibatches = 0;
  {
    // The published weights and the minibatches that made them are updated together under these.
    absl::MutexLock apply(&apply_mu_);
    absl::MutexLock stats(&stats_mu_);
    weights = store_->Snapshot();
    applied_minibatches = counters_.applied_minibatches;
  }
  // Two folds that read in one order and fold in the other: the older one finds its minibatches
  // already covered and changes nothing.
  absl::MutexLock lock(&average_mu_);
  return average_->Fold(*weights, applied_minibatches);
}

void ParameterServer::CountRejection(const std::string& agent_id, v1::RejectReason reason) {
  absl::MutexLock lock(&stats_mu_);
  ++counters_.rejections[reason];
  if (!agent_id.empty()) agents_.Refused(agent_id);
}

void ParameterServer::CountBytes(uint64_t in, uint64_t out) {
  bytes_in_.fetch_add(in, std::memory_order_relaxed);
  bytes_out_.fetch_add(out, std::memory_order_relaxed);
}

void ParameterServer::CountPull(const std::string& agent_id, bool not_newer) {
  absl::MutexLock lock(&stats_mu_);
  ++(not_newer ? counters_.pulls_not_newer : counters_.pulls_served);
  if (!agent_id.empty()) agents_.Seen(agent_id);
}

v1::StatusResponse ParameterServer::Status() const {
  v1::StatusResponse status;
  status.set_version(store_->version());
  status.set_parameter_count(model_.parameter_count);
  *status.mutable_shard() = shard_info();
  status.set_checkpoint_version(status_checkpoint_version_.load());
  status.set_checkpoint_unix_ms(status_checkpoint_unix_ms_.load());
  status.set_model_name(model_.spec.name);
  status.set_model_fingerprint(model_.fingerprint);
  status.set_incarnation(incarnation_);
  status.set_bytes_in(bytes_in_.load(std::memory_order_relaxed));
  status.set_bytes_out(bytes_out_.load(std::memory_order_relaxed));
  status.set_unauthenticated_calls(unauthenticated_.load(std::memory_order_relaxed));
  absl::MutexLock lock(&stats_mu_);
  // Read under the lock, as Apply's are: the rate meter's times never go backwards, and uptime and
  // rate are of one moment.
  const absl::Time now = absl::Now();
  status.set_uptime_seconds(absl::ToDoubleSeconds(now - started_));
  status.set_updates_applied(counters_.updates_applied);
  status.set_applied_minibatches(counters_.applied_minibatches);
  status.set_target_version(target_.version());
  status.set_epsilon(counters_.epsilon);
  status.set_pulls_served(counters_.pulls_served);
  status.set_pulls_not_newer(counters_.pulls_not_newer);
  status.set_checkpoints_written(counters_.checkpoints_written);
  status.set_checkpoint_failures(counters_.checkpoint_failures);
  status.set_repeated_pushes(counters_.repeated_pushes);
  status.set_run_id(run_id_);
  for (const auto& [reason, count] : counters_.rejections) {
    (*status.mutable_rejections())[v1::RejectReason_Name(reason)] = count;
  }
  status.set_pushes_per_second(apply_rate_.PerSecond(now));
  agents_.AddTo(status);
  return status;
}

absl::StatusOr<std::string> ParameterServer::Checkpoint() {
  if (checkpointer_ == nullptr) {
    return absl::FailedPreconditionError("no --checkpoint_dir: checkpoints are off");
  }
  absl::MutexLock writer(&checkpoint_mu_);
  CheckpointData data;
  v1::CheckpointManifest& m = data.manifest;
  FoldAverage();
  {
    absl::MutexLock lock(&average_mu_);
    if (average_ != nullptr) average_->SaveTo(data);
  }
  {
    // A consistent cut: weights, optimizer state and counters of one version.
    absl::MutexLock lock(&apply_mu_);
    data.weights = store_->Snapshot();
    if (data.weights->version == checkpointed_version_) return checkpointed_path_;  // Nothing new.
    CONVOY_RETURN_IF_ERROR(SaveOptimizerTo(*optimizer_, options_.optimizer.kind, data));
    target_.SaveTo(data);
    m.set_version(data.weights->version);
    m.set_epsilon(exploration_->global_epsilon());
    // The records say exactly which pushes the checkpoint's version contains.
    dedup_.SaveTo(m);
    lineage_.SaveTo(data.weights->version, m);
    absl::MutexLock stats(&stats_mu_);
    counters_.SaveTo(m);
  }
  m.set_model_name(model_.spec.name);
  m.set_model_fingerprint(model_.fingerprint);
  m.set_parameter_count(model_.parameter_count);
  *m.mutable_shard() = shard_info();
  for (const auto& [key, value] : HyperparametersOf(options_))
    (*m.mutable_hyperparameters())[key] = value;
  m.set_created_unix_ms(absl::ToUnixMillis(absl::Now()));

  absl::StatusOr<std::string> path = checkpointer_->Write(data);
  if (path.ok()) {
    checkpointed_version_ = m.version();
    checkpointed_path_ = *path;
    status_checkpoint_version_.store(m.version());
    status_checkpoint_unix_ms_.store(m.created_unix_ms());
    for (ApplyHook* hook : hooks_) hook->Checkpointed(incarnation_, m.version());
  }
  absl::MutexLock stats(&stats_mu_);
  if (path.ok()) {
    ++counters_.checkpoints_written;
  } else {
    ++counters_.checkpoint_failures;
  }
  return path;
}

void ParameterServer::StartPeriodicTasks() {
  {
    absl::MutexLock lock(&loop_mu_);
    if (options_.average_horizon > 0 && average_task_ == nullptr) {
      average_task_ = std::make_unique<PeriodicTask>("average", options_.average_every,
                                                     [this] { FoldAverage(); });
    }
  }
  if (checkpointer_ != nullptr) checkpoint_trigger_.Start([this] { PeriodicCheckpoint(); });
}

void ParameterServer::PeriodicCheckpoint() {
  // A checkpoint of an unchanged version writes nothing (Checkpoint() returns the last one's path).
  absl::StatusOr<std::string> path = Checkpoint();
  if (path.ok()) {
    VLOG(1) << "checkpoint " << *path;
  } else {
    LOG(ERROR) << "checkpoint failed, training goes on: " << path.status();
  }
}

}  // namespace convoy
