#include "param_server/core/parameter_server.h"

#include <glog/logging.h>

#include <algorithm>
#include <map>
#include <optional>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "common/settings/flag_ranges.h"
#include "common/support/init.h"
#include "common/support/status_macros.h"
#include "common/wire/tensor_encoding.h"

namespace convoy::ps {
namespace {

// Pushes per second are measured over this trailing window.
constexpr absl::Duration kRateWindow = absl::Seconds(10);

uint64_t NewIncarnation() {
  absl::BitGen rng;
  return absl::Uniform<uint64_t>(absl::IntervalClosed, rng, 1, UINT64_MAX);
}

std::map<std::string, std::string> HyperparametersOf(const ParameterServerOptions& o) {
  const OptimizerSettings& opt = o.optimizer;
  std::map<std::string, std::string> hyperparameters = {
      {"optimizer", std::string(OptimizerName(opt.kind))},
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
      {"seed", absl::StrCat(o.seed)},
      {"max_pushes_per_step", absl::StrCat(o.max_pushes_per_step)},
  };
  for (auto& [name, value] : RunSettingValues(o)) hyperparameters.emplace(name, value);
  return hyperparameters;
}

// The key exactly-once records a push under.
std::string PushKey(const PushHeader& header) {
  return absl::StrCat(header.agent_id, "/", header.push_session, "/", header.sequence);
}

}  // namespace

// A push of a drained batch, as the worker decides it.
struct ParameterServer::Decided {
  enum class Kind {
    kApplied,        // In the step.
    kRefused,        // By the lineage or staleness rule; nothing applied.
    kRepeat,         // Answered before: that answer again.
    kRepeatInBatch,  // Of a push earlier in this batch: that push's answer, once it is final.
  };
  Kind kind = Kind::kRefused;
  PushAnswer outcome;
  uint32_t agent_index = 0;
  size_t first = 0;  // kRepeatInBatch: the earlier push's index in the batch.
};

OptimizerOptions OptimizerOptionsOf(const ParameterServerOptions& options) {
  OptimizerOptions optimizer;
  static_cast<OptimizerSettings&>(optimizer) = options.optimizer;
  optimizer.learning_rate = options.learning_rate;
  return optimizer;
}

ExplorationOptions ExplorationOptionsOf(const ParameterServerOptions& options) {
  ExplorationOptions exploration;
  static_cast<ExplorationSettings&>(exploration) = options.exploration;
  exploration.min_epsilon = options.min_epsilon;
  exploration.per_iter_epsilon_reduction = options.per_iter_epsilon_reduction;
  return exploration;
}

absl::StatusOr<std::unique_ptr<ParameterServer>> ParameterServer::Create(
    const ParameterServerOptions& options) {
  CONVOY_RETURN_IF_ERROR(ValidateOptimizerOptions(OptimizerOptionsOf(options)));
  CONVOY_RETURN_IF_ERROR(ValidateExplorationOptions(ExplorationOptionsOf(options)));
  // The run settings' ranges are the table's (common/settings/run_settings.h), as convoy_ps's flags
  // check them.
  CONVOY_RETURN_IF_ERROR(CheckFlagRanges(RunSettingRanges(options)));
  if (options.max_pushes_per_step < 1) {
    return absl::InvalidArgumentError("max_pushes_per_step must be at least 1");
  }
  if (options.learning_rate_decay_minibatches > 0 && options.learning_rate_decay_minutes > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--learning_rate_decay_minibatches=", options.learning_rate_decay_minibatches,
                     " and --learning_rate_decay_minutes=", options.learning_rate_decay_minutes,
                     " both schedule the learning rate's fall: give one (0 turns the other off)"));
  }
  if ((options.learning_rate_decay_minibatches > 0 || options.learning_rate_decay_minutes > 0) &&
      options.optimizer.kind == Optimizer::kDelta) {
    // The delta rule adds what the agents' own optimizers computed: it has no rate to schedule.
    return absl::InvalidArgumentError(absl::StrCat(
        options.learning_rate_decay_minibatches > 0 ? "--learning_rate_decay_minibatches"
                                                    : "--learning_rate_decay_minutes",
        " needs a server optimizer (adam, adamw, rmsprop, sgd); "
        "--optimizer=delta applies the agents' deltas as they are"));
  }
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
  SetApplyThreads(options.apply_threads);
  std::unique_ptr<ParameterServer> server(
      new ParameterServer(options, std::move(model), std::move(map)));
  CONVOY_RETURN_IF_ERROR(server->Initialise());
  ParameterServer* const self = server.get();
  server->apply_worker_ = std::thread([self] { self->ApplyLoop(); });
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
      exploration_(ExplorationOptionsOf(options)),
      counters_(kRateWindow, started_),
      target_(options.target_update_frequency, options.target_update_tau),
      checkpoint_trigger_(options.checkpoint_every_updates, options.checkpoint_every) {}

ParameterServer::~ParameterServer() {
  // Everything queued is still decided and answered.
  queue_.Close();
  if (apply_worker_.joinable()) apply_worker_.join();
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
  CONVOY_ASSIGN_OR_RETURN(std::optional<LoadedCheckpoint> resumed, LoadResumed());
  LoadedCheckpoint* const from = resumed ? &*resumed : nullptr;
  CONVOY_ASSIGN_OR_RETURN(std::vector<float> initial, InitialWeights(from));

  const uint64_t version = resumed ? resumed->manifest.version() : 0;
  const uint64_t checkpoint_writer = resumed ? Lineage::WriterOf(resumed->manifest) : 0;
  if (!options_.apply_log.empty()) {
    CONVOY_ASSIGN_OR_RETURN(apply_log_, ApplyLog::Open(options_.apply_log));
    apply_log_->Started(incarnation_, version, checkpoint_writer);
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
  std::shared_ptr<const WeightSnapshot> initial_snapshot;
  uint64_t applied_minibatches = 0;
  CONVOY_RETURN_IF_ERROR(
      InitialiseParts(std::move(initial), version, from, &initial_snapshot, &applied_minibatches));
  if (resumed) JoinResumedLineage(*resumed, version, checkpoint_writer);
  if (options_.average_horizon == 0) return absl::OkStatus();
  return InitialiseAverage(*initial_snapshot, version, applied_minibatches, from);
}

absl::StatusOr<std::optional<LoadedCheckpoint>> ParameterServer::LoadResumed() {
  std::optional<LoadedCheckpoint> resumed;
  if (!options_.resume) return resumed;
  absl::StatusOr<LoadedCheckpoint> loaded = checkpointer_->LoadNewest();
  if (loaded.ok()) {
    resumed = *std::move(loaded);
    checkpointer_->AdoptRun(resumed->manifest);
  } else if (loaded.status().code() == absl::StatusCode::kFailedPrecondition) {
    return loaded.status();
  } else {
    LOG(WARNING) << "--resume: " << loaded.status().message() << "; starting fresh";
  }
  return resumed;
}

absl::StatusOr<std::vector<float>> ParameterServer::InitialWeights(
    const LoadedCheckpoint* resumed) const {
  std::vector<float> initial;
  if (resumed != nullptr) {
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
  if (resumed == nullptr && shard_map_.num_shards() > 1) {
    const ShardRange& range = shard_map_.ranges[options_.shard_index];
    initial = std::vector<float>(initial.begin() + range.begin, initial.begin() + range.end);
  }
  return initial;
}

absl::Status ParameterServer::InitialiseParts(
    std::vector<float> initial, uint64_t version, LoadedCheckpoint* resumed,
    std::shared_ptr<const WeightSnapshot>* initial_snapshot, uint64_t* applied_minibatches) {
  absl::MutexLock lock(&mu_);
  store_ = std::make_unique<WeightStore>(std::move(initial), version);
  CONVOY_ASSIGN_OR_RETURN(
      optimizer_, FlatOptimizer::Create(OptimizerOptionsOf(options_), store_->mutable_master(),
                                        store_->size()));
  // Told of each step in this order: the counters first (the target reads the run's minibatches
  // from the step, which the worker takes from them).
  parts_ = {optimizer_.get(), &exploration_, &counters_, &target_, &dedup_};
  if (apply_log_ != nullptr) parts_.push_back(apply_log_.get());
  // With both triggers off it has nothing to count.
  if (checkpointer_ != nullptr && checkpoint_trigger_.enabled()) {
    parts_.push_back(&checkpoint_trigger_);
  }
  *initial_snapshot = store_->Snapshot();
  if (resumed != nullptr) {
    for (ServerPart* part : parts_) CONVOY_RETURN_IF_ERROR(part->Restore(mu_, *resumed));
    *applied_minibatches = counters_.applied_minibatches();
  } else {
    target_.Start(mu_, *initial_snapshot);
  }
  // The fall over minutes ends that many minutes of training after this start, wherever the
  // run's clock stands.
  if (options_.learning_rate_decay_minutes > 0) {
    decay_horizon_ =
        counters_.training_time() + absl::Minutes(options_.learning_rate_decay_minutes);
  }
  return absl::OkStatus();
}

void ParameterServer::JoinResumedLineage(const LoadedCheckpoint& resumed, uint64_t version,
                                         uint64_t checkpoint_writer) {
  if (!lineage_.Restore(resumed.manifest)) {
    LOG(WARNING) << "checkpoint " << resumed.path
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
  LOG(INFO) << "resumed from " << resumed.path << " (run " << run_id_ << ") at version " << version;
}

absl::Status ParameterServer::InitialiseAverage(const WeightSnapshot& initial, uint64_t version,
                                                uint64_t applied_minibatches,
                                                LoadedCheckpoint* resumed) {
  absl::MutexLock average(&average_mu_);
  average_ = std::make_unique<WeightAverage>(options_.average_horizon, initial.values, version,
                                             applied_minibatches);
  if (resumed != nullptr && !resumed->average.empty()) {
    if (absl::Status s = average_->Restore(resumed->manifest, std::move(resumed->average));
        !s.ok()) {
      return absl::DataLossError(absl::StrCat(resumed->path, ": ", s.message()));
    }
  } else if (resumed != nullptr) {
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
    absl::MutexLock lock(&mu_);
    config.set_epsilon(exploration_.EpsilonFor(agent_index));
  }
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
  agents_.Joined(request.agent_id(), request.hostname(), request.agent_index());
  response.set_target_version(target_.version());
  LOG(INFO) << "agent " << request.agent_id() << " (index " << request.agent_index()
            << ") joined from " << request.hostname();
  return response;
}

void ParameterServer::Submit(const PushHeader& header, std::vector<float> values, PushDone done) {
  QueuedPush push{header, std::move(values), std::move(done)};
  if (queue_.Add(push)) return;
  // Closed: the server is being destroyed.
  PushAnswer outcome;
  outcome.reason = v1::REJECT_REASON_SHUTTING_DOWN;
  outcome.version = store_->version();
  outcome.incarnation = incarnation_;
  CountRejection(header.agent_id, v1::REJECT_REASON_SHUTTING_DOWN);
  std::move(push.done)(outcome, std::move(push.values));
}

PushAnswer ParameterServer::Apply(const PushHeader& header, std::vector<float>& values) {
  // Shared with the worker's callback, which may still be returning when the answer is read.
  struct Answer {
    absl::Notification ready;
    PushAnswer outcome;
    std::vector<float> buffer;
  };
  auto answer = std::make_shared<Answer>();
  Submit(header, std::move(values), [answer](const PushAnswer& outcome, std::vector<float> buffer) {
    answer->outcome = outcome;
    answer->buffer = std::move(buffer);
    answer->ready.Notify();
  });
  answer->ready.WaitForNotification();
  values = std::move(answer->buffer);
  return answer->outcome;
}

PushAnswer ParameterServer::Apply(const std::string& agent_id, uint64_t base_version,
                                  uint32_t minibatch_count, std::vector<float>& values) {
  PushHeader header;
  header.agent_id = agent_id;
  header.base_version = base_version;
  header.minibatch_count = minibatch_count;
  return Apply(header, values);
}

void ParameterServer::ApplyLoop() {
  while (true) {
    std::vector<QueuedPush> batch = queue_.Take(options_.max_pushes_per_step);
    if (batch.empty()) return;  // Closed and drained.
    ApplyBatch(batch);
  }
}

void ParameterServer::ApplyBatch(std::vector<QueuedPush>& batch) {
  std::vector<Decided> decided(batch.size());
  // Marked seen before the writer's lock (the registry's is a leaf of its own).
  for (size_t i = 0; i < batch.size(); ++i) {
    decided[i].agent_index = agents_.Seen(batch[i].header.agent_id);
  }
  AppliedStep step;
  {
    absl::MutexLock lock(&mu_);
    counters_.Drained(static_cast<uint32_t>(batch.size()));
    const uint64_t base = store_->version();
    std::vector<StepInput> inputs;
    DecideBatch(batch, base, decided, inputs, step);
    if (!inputs.empty()) TakeStep(inputs, base, step);
    AnswerBatch(batch, static_cast<uint32_t>(inputs.size()), decided);
  }
  if (!step.pushes.empty()) {
    for (ServerPart* part : parts_) part->AfterApply(step);
    absl::MutexLock lock(&observers_mu_);
    for (const std::shared_ptr<StepObserver>& observer : observers_) observer->Stepped(step);
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    std::move(batch[i].done)(decided[i].outcome, std::move(batch[i].values));
  }
}

void ParameterServer::DecideBatch(std::vector<QueuedPush>& batch, uint64_t base,
                                  std::vector<Decided>& decided, std::vector<StepInput>& inputs,
                                  AppliedStep& step) {
  // Pushes of this batch that exactly-once records, by key: a repeat of one of them in the same
  // batch is answered with its answer, once that is final.
  std::map<std::string, size_t> in_batch;
  for (size_t i = 0; i < batch.size(); ++i) {
    const PushHeader& header = batch[i].header;
    Decided& d = decided[i];
    PushAnswer& outcome = d.outcome;
    if (header.sequence != 0) {
      if (auto it = in_batch.find(PushKey(header)); it != in_batch.end()) {
        d.kind = Decided::Kind::kRepeatInBatch;
        d.first = it->second;
        continue;
      }
    }
    // Repeat detection and the apply are one step under the writer's lock, so two attempts of
    // one push that arrive together still apply once.
    const PushDeduplicator::Seen seen =
        dedup_.Check(header.agent_id, header.push_session, header.sequence);
    if (seen.verdict == PushDeduplicator::Verdict::kRepeat) {
      d.kind = Decided::Kind::kRepeat;
      outcome = seen.answer;
      continue;
    }
    if (seen.verdict == PushDeduplicator::Verdict::kSuperseded) {
      d.kind = Decided::Kind::kRepeat;
      outcome.reason = v1::REJECT_REASON_SUPERSEDED;
      continue;
    }
    DecideNew(batch[i], base, d, inputs, step);
    // Recorded now, so that a later push of this agent in the batch is decided against it (its
    // version is filled in below, once the step is taken).
    dedup_.Record(header.agent_id, header.push_session, header.sequence, outcome);
    if (header.sequence != 0) in_batch[PushKey(header)] = i;
  }
}

void ParameterServer::DecideNew(QueuedPush& push, uint64_t base, Decided& d,
                                std::vector<StepInput>& inputs, AppliedStep& step) {
  const PushHeader& header = push.header;
  PushAnswer& outcome = d.outcome;
  if (header.base_incarnation != 0 && header.base_incarnation != incarnation_ &&
      !lineage_.HoldsEarlier(header.base_incarnation, header.base_version)) {
    // Computed on weights these never were: versions a killed start applied after its last
    // checkpoint, or another run's. Their numbers say nothing about staleness here.
    outcome.reason = v1::REJECT_REASON_BASE_NOT_IN_LINEAGE;
    return;
  }
  // This start's version, or one of the lineage's (at most the version this start resumed at):
  // either way a version of these weights, as stale as the versions applied since.
  const StalenessDecision decision = staleness_.Decide(base, header.base_version);
  outcome.staleness = decision.staleness;
  if (decision.kind != StalenessDecision::Kind::kApply) {
    outcome.reason = decision.kind == StalenessDecision::Kind::kRejectStale
                         ? v1::REJECT_REASON_STALE
                         : v1::REJECT_REASON_AHEAD;
    return;
  }
  d.kind = Decided::Kind::kApplied;
  outcome.accepted = true;
  inputs.push_back(StepInput{push.values.data(), header.minibatch_count, decision.lr_scale});
  step.pushes.push_back(AppliedPush{header.agent_id, header.push_session, header.sequence,
                                    header.minibatch_count, decision.staleness});
  step.minibatches += header.minibatch_count;
}

void ParameterServer::TakeStep(std::vector<StepInput>& inputs, uint64_t base, AppliedStep& step) {
  const absl::Time step_start = absl::Now();
  const double scheduled = ScheduledLearningRateScale();
  for (StepInput& input : inputs) input.lr_scale *= scheduled;
  optimizer_->Step(inputs);
  step.incarnation = incarnation_;
  step.version = base + 1;
  step.applied_minibatches = counters_.applied_minibatches() + step.minibatches;
  store_->Publish(step.version);
  step.at = step_start;
  step.step_time = absl::Now() - step_start;
  step.published = store_->Snapshot();
  for (ServerPart* part : parts_) part->Applied(mu_, step);
}

void ParameterServer::AnswerBatch(const std::vector<QueuedPush>& batch, uint32_t step_pushes,
                                  std::vector<Decided>& decided) {
  // Every push of the batch is answered with the version the step made (the base when nothing
  // applied).
  const uint64_t version = store_->version();
  const uint64_t target_version = target_.version();
  for (size_t i = 0; i < batch.size(); ++i) {
    const PushHeader& header = batch[i].header;
    Decided& d = decided[i];
    PushAnswer& outcome = d.outcome;
    switch (d.kind) {
      case Decided::Kind::kApplied:
      case Decided::Kind::kRefused:
        outcome.version = version;
        outcome.incarnation = incarnation_;
        outcome.epsilon = exploration_.EpsilonFor(d.agent_index);
        outcome.step_pushes = step_pushes;
        dedup_.Record(header.agent_id, header.push_session, header.sequence, outcome);
        if (!outcome.accepted) counters_.Rejected(outcome.reason);
        agents_.Answered(header.agent_id, outcome);
        break;
      case Decided::Kind::kRepeatInBatch:
        outcome = decided[d.first].outcome;
        outcome.repeated = true;
        counters_.Repeated();
        if (!outcome.accepted) counters_.Rejected(outcome.reason);
        break;
      case Decided::Kind::kRepeat:
        if (outcome.reason == v1::REJECT_REASON_SUPERSEDED) {
          outcome.version = version;
          outcome.incarnation = incarnation_;
          outcome.epsilon = exploration_.EpsilonFor(d.agent_index);
        }
        outcome.repeated = true;
        counters_.Repeated();
        if (!outcome.accepted) counters_.Rejected(outcome.reason);
        break;
    }
    outcome.target_version = target_version;
  }
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
    // The published weights and the minibatches that made them are updated together under mu_.
    absl::MutexLock apply(&mu_);
    weights = store_->Snapshot();
    applied_minibatches = counters_.applied_minibatches();
  }
  // Two folds that read in one order and fold in the other: the older one finds its minibatches
  // already covered and changes nothing.
  absl::MutexLock lock(&average_mu_);
  return average_->Fold(*weights, applied_minibatches);
}

void ParameterServer::CountRejection(const std::string& agent_id, v1::RejectReason reason) {
  refused_[static_cast<size_t>(reason)].fetch_add(1, std::memory_order_relaxed);
  if (!agent_id.empty()) agents_.Refused(agent_id);
}

void ParameterServer::CountBytes(uint64_t in, uint64_t out) {
  bytes_in_.fetch_add(in, std::memory_order_relaxed);
  bytes_out_.fetch_add(out, std::memory_order_relaxed);
}

void ParameterServer::CountPull(const std::string& agent_id, bool not_newer) {
  (not_newer ? pulls_not_newer_ : pulls_served_).fetch_add(1, std::memory_order_relaxed);
  if (!agent_id.empty()) agents_.Seen(agent_id);
}

void ParameterServer::AddStepObserver(std::shared_ptr<StepObserver> observer) {
  absl::MutexLock lock(&observers_mu_);
  observers_.push_back(std::move(observer));
}

v1::StatusResponse ParameterServer::Status() const {
  v1::StatusResponse status;
  status.set_parameter_count(model_.parameter_count);
  *status.mutable_shard() = shard_info();
  status.set_checkpoint_version(status_checkpoint_version_.load());
  status.set_checkpoint_unix_ms(status_checkpoint_unix_ms_.load());
  status.set_model_name(model_.spec.name);
  status.set_model_fingerprint(model_.fingerprint);
  status.set_incarnation(incarnation_);
  status.set_run_id(run_id_);
  status.set_bytes_in(bytes_in_.load(std::memory_order_relaxed));
  status.set_bytes_out(bytes_out_.load(std::memory_order_relaxed));
  status.set_unauthenticated_calls(unauthenticated_.load(std::memory_order_relaxed));
  status.set_pulls_served(pulls_served_.load(std::memory_order_relaxed));
  status.set_pulls_not_newer(pulls_not_newer_.load(std::memory_order_relaxed));
  status.set_checkpoints_written(checkpoints_written_.load(std::memory_order_relaxed));
  status.set_checkpoint_failures(checkpoint_failures_.load(std::memory_order_relaxed));
  status.set_max_pushes_per_step(options_.max_pushes_per_step);
  status.set_pushes_queued(static_cast<uint32_t>(queue_.size()));
  {
    absl::MutexLock lock(&mu_);
    // Of one moment: the version, the counts of the steps that made it, and the epsilon they left.
    const absl::Time now = absl::Now();
    status.set_uptime_seconds(absl::ToDoubleSeconds(now - started_));
    status.set_version(store_->version());
    status.set_epsilon(exploration_.global_epsilon());
    counters_.AddTo(status, now);
    status.set_learning_rate_scale(ScheduledLearningRateScale());
  }
  status.set_target_version(target_.version());
  for (size_t reason = 0; reason < refused_.size(); ++reason) {
    const uint64_t count = refused_[reason].load(std::memory_order_relaxed);
    if (count == 0) continue;
    (*status.mutable_rejections())[v1::RejectReason_Name(static_cast<v1::RejectReason>(reason))] +=
        count;
  }
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
    // A consistent cut: every part as of one version.
    absl::MutexLock lock(&mu_);
    data.weights = store_->Snapshot();
    if (data.weights->version == checkpointed_version_) return checkpointed_path_;  // Nothing new.
    for (ServerPart* part : parts_) CONVOY_RETURN_IF_ERROR(part->SaveTo(mu_, data));
    m.set_version(data.weights->version);
    // The records say exactly which pushes the checkpoint's version contains.
    lineage_.SaveTo(data.weights->version, m);
  }
  // The refusals before the apply carry over with the policy's (ApplyCounters::SaveTo).
  for (size_t reason = 0; reason < refused_.size(); ++reason) {
    const uint64_t count = refused_[reason].load(std::memory_order_relaxed);
    if (count == 0) continue;
    (*m.mutable_rejections())[v1::RejectReason_Name(static_cast<v1::RejectReason>(reason))] +=
        count;
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
    for (ServerPart* part : parts_) part->Checkpointed(incarnation_, m.version());
    checkpoints_written_.fetch_add(1, std::memory_order_relaxed);
  } else {
    checkpoint_failures_.fetch_add(1, std::memory_order_relaxed);
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

double ParameterServer::ScheduledLearningRateScale() const {
  if (options_.learning_rate_decay_minutes > 0) {
    return LearningRateScaleOverTime(counters_.training_time(), decay_horizon_,
                                     options_.final_learning_rate_scale);
  }
  return LearningRateScale(counters_.applied_minibatches(),
                           options_.learning_rate_decay_minibatches,
                           options_.final_learning_rate_scale);
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

}  // namespace convoy::ps
