// ParameterServer: the transport-free core of convoy_ps. It owns the master weights, the optimizer,
// the staleness policy, the target network, the exploration schedule, the counters and the
// checkpoints. The gRPC service (service.h) is a thin edge over it.
#ifndef CONVOY_PARAM_SERVER_CORE_PARAMETER_SERVER_H_
#define CONVOY_PARAM_SERVER_CORE_PARAMETER_SERVER_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/model/model_registry.h"
#include "common/model/shard_map.h"
#include "common/settings/exploration.h"
#include "common/settings/run_defaults.h"
#include "common/settings/run_settings.h"
#include "common/support/periodic_task.h"
#include "common/wire/push_answer.h"
#include "convoy/v1/parameter_server.pb.h"
#include "param_server/core/agent_registry.h"
#include "param_server/core/apply_counters.h"
#include "param_server/core/apply_log.h"
#include "param_server/core/checkpoint_trigger.h"
#include "param_server/core/checkpointer.h"
#include "param_server/core/lineage.h"
#include "param_server/core/optimizer.h"
#include "param_server/core/push_assembler.h"
#include "param_server/core/push_deduplicator.h"
#include "param_server/core/push_queue.h"
#include "param_server/core/server_exploration.h"
#include "param_server/core/server_part.h"
#include "param_server/core/staleness_policy.h"
#include "param_server/core/target_network.h"
#include "param_server/core/weight_average.h"
#include "param_server/core/weight_store.h"

namespace convoy::ps {

// The default of --max_pushes_per_step (docs/benchmarks.md, "Many agents, one server").
inline constexpr uint32_t kDefaultMaxPushesPerStep = 16;

// Every default here is the one its convoy_ps flag shows (the flags are declared from this struct).
// RunSettings: the learner's settings the server hands to agents (RunConfig), which they adopt on
// Join; target_update_frequency (applied minibatches between target snapshots) among them.
struct ParameterServerOptions : RunSettings {
  std::string model = run_defaults::kServerModel;
  int num_actions = kDefaultNumActions;
  uint64_t seed = 1;
  std::string init_checkpoint;  // A checkpoint directory to take the initial weights from.
  std::string checkpoint_dir;   // Empty: no checkpoints.
  // Start from the newest valid checkpoint in checkpoint_dir, if any. Without it, a checkpoint_dir
  // that holds checkpoints is refused (FAILED_PRECONDITION): they belong to another run.
  bool resume = false;
  int keep_checkpoints = 5;
  uint64_t checkpoint_every_updates = 0;                // 0: off.
  absl::Duration checkpoint_every = absl::Seconds(60);  // 0: off.
  OptimizerSettings optimizer;  // Its learning rate: the run setting learning_rate.
  int64_t max_staleness = -1;   // < 0: accept any.
  bool staleness_lr_scaling = false;
  // The averaged network (NETWORK_AVERAGE, weight_average.h): an exponential average of the online
  // weights over this many applied minibatches (0: none), folded every average_every off the apply
  // path.
  uint64_t average_horizon = run_defaults::kAverageHorizon;
  absl::Duration average_every = absl::Seconds(1);
  ExplorationSettings exploration;  // Its floor and decay: the run settings.
  // Empty: none. Otherwise every start, applied update and checkpoint is appended here (ApplyLog).
  std::string apply_log;
  // Pushes one optimizer step may combine: the apply worker drains up to this many queued pushes
  // and steps once on the accepted ones (Submit). 1: one step, one version per push, bit for bit
  // as before batching. Larger batches take one step per many pushes when many agents push at
  // once; a lone agent's batches hold its one push (docs/benchmarks.md, "Many agents, one server").
  uint32_t max_pushes_per_step = kDefaultMaxPushesPerStep;
  // Threads of the optimizer step (SetApplyThreads); 0: LibTorch's default, one per core.
  uint32_t apply_threads = 0;
  // Sharding (common/model/shard_map.h): this server serves range shard_index of the model split
  // num_shards ways: its slice of the weights, of the target network and of the optimizer state,
  // with versions, exactly-once records and checkpoints of its own. 1 shard: the whole model.
  uint32_t num_shards = 1;
  uint32_t shard_index = 0;
};

// The optimizer's and the exploration schedule's options: their own settings in `options`, with the
// run settings' learning rate, epsilon floor and decay.
OptimizerOptions OptimizerOptionsOf(const ParameterServerOptions& options);
ExplorationOptions ExplorationOptionsOf(const ParameterServerOptions& options);

// Thread-safe. Pushes are admitted apart from the apply: Submit queues a received push and returns
// at once, and one apply worker drains the queue, up to max_pushes_per_step pushes at a time, into
// one optimizer step and one published version (docs/architecture.md, "Concurrency in the
// parameter server"). Snapshots never wait for an apply; Status, Join and checkpoints wait for the
// step in progress at most.
//
// Locks, in the order they may be taken (Clang's thread-safety analysis checks it:
// docs/testing.md):
//   checkpoint_mu_  one checkpoint write at a time; taken before mu_.
//   mu_             the writer's: the optimizer step and every part of the state it changes
//                   (server_part.h), and a checkpoint's capture of them.
//   leaves          each part's published snapshot (WeightStore, TargetNetwork), the agent
//                   registry, the push queue, the averaged network: short, and never held while
//                   taking another lock.
class ParameterServer {
 public:
  // Builds the model's initial state: the newest valid checkpoint when resuming, else
  // --init_checkpoint's weights, else weights drawn from the seed, and starts the apply worker.
  // Errors: INVALID_ARGUMENT for bad options; FAILED_PRECONDITION when a checkpoint belongs to
  // another model (naming both fingerprints); DATA_LOSS for an unreadable --init_checkpoint.
  static absl::StatusOr<std::unique_ptr<ParameterServer>> Create(
      const ParameterServerOptions& options);
  // Answers every push submitted before it (nothing accepted is lost), then stops the worker.
  ~ParameterServer();

  // Registers an agent. Errors: FAILED_PRECONDITION naming both fingerprints on a model mismatch.
  absl::StatusOr<v1::JoinResponse> Join(const v1::JoinRequest& request) ABSL_LOCKS_EXCLUDED(mu_);

  // Queues a validated, complete push (`values` model-sized) for the apply worker and returns at
  // once. `done` runs once on the worker, with none of the server's locks held, with the push's
  // answer and its buffer. The worker decides each push of a drained batch in arrival order,
  // against the version before the batch's step: exactly once, a push of the (agent_id,
  // push_session, sequence) last answered gets that answer again (repeated=true) and one older than
  // it is SUPERSEDED, neither applying anything; BASE_NOT_IN_LINEAGE when header.base_incarnation
  // is set, not this server start's, and base_version is not a version of that start which this
  // server's weights descend from (lineage()); else STALE or AHEAD by version, or accepted. The
  // accepted pushes make one optimizer step (FlatOptimizer::Step: their minibatch-weighted mean)
  // and one version, and every push of the batch is answered with that version. A new push_session
  // of an agent (a new client, a restarted process) starts its sequence space afresh. Join changes
  // nothing here, so a push retried across a rejoin is still recognised; the records are
  // checkpointed with the weights and restored on resume, so one retried across a restart is too.
  // Once the server is being destroyed, `done` is answered SHUTTING_DOWN at once, nothing applied.
  void Submit(const PushHeader& header, std::vector<float> values, PushDone done)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Submit, then waits for the answer; `values` is the push on the way in and its buffer on the way
  // out.
  PushAnswer Apply(const PushHeader& header, std::vector<float>& values) ABSL_LOCKS_EXCLUDED(mu_);
  // An older client's push: no incarnation, no sequence.
  PushAnswer Apply(const std::string& agent_id, uint64_t base_version, uint32_t minibatch_count,
                   std::vector<float>& values) ABSL_LOCKS_EXCLUDED(mu_);

  // The snapshot a pull streams. Never waits for an apply. Null for NETWORK_AVERAGE when averaging
  // is off.
  std::shared_ptr<const WeightSnapshot> Snapshot(v1::Network network) const
      ABSL_LOCKS_EXCLUDED(mu_);

  // Folds the newest online weights into the averaged network now (the background task does it
  // every average_every once StartPeriodicTasks ran; a checkpoint does it first). Returns whether
  // the average changed; false when averaging is off.
  bool FoldAverage() ABSL_LOCKS_EXCLUDED(mu_, average_mu_);

  // Counts a push refused before it reached the apply: malformed, or the server busy or stopping.
  // Never waits for an apply.
  void CountRejection(const std::string& agent_id, v1::RejectReason reason);
  void CountBytes(uint64_t in, uint64_t out);
  void CountPull(const std::string& agent_id, bool not_newer);
  void CountUnauthenticated() { unauthenticated_.fetch_add(1, std::memory_order_relaxed); }

  v1::StatusResponse Status() const ABSL_LOCKS_EXCLUDED(mu_);
  // Tells `observer` of every optimizer step from now on, after the step's pushes are decided and
  // before they are answered, with none of the server's locks held but its own.
  void AddStepObserver(std::shared_ptr<StepObserver> observer) ABSL_LOCKS_EXCLUDED(observers_mu_);

  // Writes a checkpoint of a consistent state now and returns its path; when this run already holds
  // a checkpoint of the current version, that one's path, and nothing is written or counted.
  // Errors: FAILED_PRECONDITION without --checkpoint_dir, or when another run's checkpoint holds
  // the version; the file error otherwise (the previous checkpoints stay intact, training goes on).
  absl::StatusOr<std::string> Checkpoint() ABSL_LOCKS_EXCLUDED(checkpoint_mu_, mu_);

  // Starts the background threads: the one that checkpoints every N updates and/or every T seconds
  // (each measured from the previous periodic checkpoint; none without --checkpoint_dir or with
  // both triggers off) and the one that folds the averaged network every average_every (none with
  // averaging off). Does nothing when already started. The destructor stops them, after finishing a
  // checkpoint in progress.
  void StartPeriodicTasks();

  // What this server serves: the model itself, or for a shard its slice (parameter_count the
  // slice's size, one layout slot), with the model's spec and fingerprint.
  const ModelInfo& model() const { return model_; }
  const ModelInfo& full_model() const { return full_model_; }
  const ShardMap& shard_map() const { return shard_map_; }
  // This shard on the wire and in checkpoints.
  v1::ShardInfo shard_info() const;
  uint64_t incarnation() const { return incarnation_; }
  // The server starts whose versions the weights descend from. Fixed once Create returns.
  const Lineage& lineage() const { return lineage_; }
  // The run the checkpoints belong to: new at a first start, the resumed checkpoint's with
  // --resume.
  const std::string& run_id() const { return run_id_; }
  uint64_t version() const { return store_->version(); }
  const ParameterServerOptions& options() const { return options_; }
  v1::RunConfig RunConfigFor(uint32_t agent_index) const ABSL_LOCKS_EXCLUDED(mu_);
  // Pushes received whole and waiting for the apply worker.
  size_t queued_pushes() const { return queue_.size(); }

 private:
  ParameterServer(const ParameterServerOptions& options, ModelInfo full_model, ShardMap map);
  absl::Status Initialise() ABSL_LOCKS_EXCLUDED(checkpoint_mu_, mu_, average_mu_);
  // The checkpoint to resume from: none without --resume, or (with a warning) when no valid one
  // is found. Errors: FAILED_PRECONDITION when the newest belongs to another model.
  absl::StatusOr<std::optional<LoadedCheckpoint>> LoadResumed();
  // The weights to start from: `resumed`'s (when not null), --init_checkpoint's or drawn from the
  // seed; for a shard, its slice.
  absl::StatusOr<std::vector<float>> InitialWeights(const LoadedCheckpoint* resumed) const;
  // The store, the optimizer and the parts, restored from `resumed` when it is not null; returns
  // the first published snapshot and the run's applied minibatches.
  absl::Status InitialiseParts(std::vector<float> initial, uint64_t version,
                               LoadedCheckpoint* resumed,
                               std::shared_ptr<const WeightSnapshot>* initial_snapshot,
                               uint64_t* applied_minibatches) ABSL_LOCKS_EXCLUDED(mu_);
  // Takes in the lineage and the starts that a resumed checkpoint's run made, and records this one.
  void JoinResumedLineage(const LoadedCheckpoint& resumed, uint64_t version,
                          uint64_t checkpoint_writer);
  // The averaged network, from `initial` or restored from `resumed` (when not null).
  absl::Status InitialiseAverage(const WeightSnapshot& initial, uint64_t version,
                                 uint64_t applied_minibatches, LoadedCheckpoint* resumed)
      ABSL_LOCKS_EXCLUDED(average_mu_);
  // The apply worker: drains the queue until it is closed and empty.
  void ApplyLoop() ABSL_LOCKS_EXCLUDED(mu_);
  // Decides, applies and answers one drained batch.
  void ApplyBatch(std::vector<QueuedPush>& batch) ABSL_LOCKS_EXCLUDED(mu_);
  // A push of a drained batch, as the worker decides it (parameter_server.cc).
  struct Decided;
  // Decides each push of `batch` against the version `base`: the accepted ones are added to
  // `inputs` and `step`.
  void DecideBatch(std::vector<QueuedPush>& batch, uint64_t base, std::vector<Decided>& decided,
                   std::vector<StepInput>& inputs, AppliedStep& step)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A push that is no repeat: refused by the lineage or staleness rule, or accepted.
  void DecideNew(QueuedPush& push, uint64_t base, Decided& d, std::vector<StepInput>& inputs,
                 AppliedStep& step) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One optimizer step on the accepted pushes, published as version base + 1.
  void TakeStep(std::vector<StepInput>& inputs, uint64_t base, AppliedStep& step)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Fills in every push's answer, of a step that combined `step_pushes` pushes.
  void AnswerBatch(const std::vector<QueuedPush>& batch, uint32_t step_pushes,
                   std::vector<Decided>& decided) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The periodic checkpoint, when one of checkpoint_trigger_'s triggers is due.
  void PeriodicCheckpoint();
  // The learning rate's share the run's schedule gives the next step
  // (common/settings/exploration.h).
  double ScheduledLearningRateScale() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ParameterServerOptions options_;
  const ModelInfo full_model_;
  const ShardMap shard_map_;
  const ModelInfo model_;  // Served: full_model_, or this shard's slice of it.
  const uint64_t incarnation_;
  std::string run_id_;  // Set once by Initialise.
  Lineage lineage_;     // Set once by Initialise.
  const absl::Time started_;
  const StalenessPolicy staleness_;
  std::unique_ptr<WeightStore> store_;  // Set once by Initialise; published by the writer only.
  std::unique_ptr<Checkpointer> checkpointer_;
  std::unique_ptr<ApplyLog> apply_log_;  // Null without options.apply_log.

  absl::Mutex checkpoint_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  // The single writer. The version is the store's: only this writer publishes, so under mu_ it is
  // the version of the master weights.
  mutable absl::Mutex mu_ ABSL_ACQUIRED_BEFORE(average_mu_);
  std::unique_ptr<FlatOptimizer> optimizer_ ABSL_GUARDED_BY(mu_);
  ServerExploration exploration_ ABSL_GUARDED_BY(mu_);
  PushDeduplicator dedup_ ABSL_GUARDED_BY(mu_);
  ApplyCounters counters_ ABSL_GUARDED_BY(mu_);
  // Where the fall over minutes ends on the training clock; set once by Initialise.
  absl::Duration decay_horizon_ ABSL_GUARDED_BY(mu_);
  // Its snapshot and version are readable without mu_ (target_network.h).
  TargetNetwork target_;
  // Runs PeriodicCheckpoint when --checkpoint_every or --checkpoint_every_updates is due; a part
  // with --checkpoint_dir.
  CheckpointTrigger checkpoint_trigger_;
  // Every part, in the order they are told of a step (the counters before the target, which reads
  // the run's minibatches from the step); fixed once Initialise returns.
  std::vector<ServerPart*> parts_;

  // Outside watchers of the steps; a leaf lock, held while they are told.
  absl::Mutex observers_mu_;
  std::vector<std::shared_ptr<StepObserver>> observers_ ABSL_GUARDED_BY(observers_mu_);

  // Admission: pushes queued for the worker, which runs ApplyLoop.
  PushQueue queue_;
  std::thread apply_worker_;

  // Counted at the edge, without mu_: refusals before the apply (by reason), pulls, bytes,
  // checkpoints.
  AgentRegistry agents_;
  std::array<std::atomic<uint64_t>, v1::RejectReason_ARRAYSIZE> refused_{};
  std::atomic<uint64_t> pulls_served_{0};
  std::atomic<uint64_t> pulls_not_newer_{0};
  std::atomic<uint64_t> bytes_in_{0};
  std::atomic<uint64_t> bytes_out_{0};
  std::atomic<uint64_t> unauthenticated_{0};
  std::atomic<uint64_t> checkpoints_written_{0};
  std::atomic<uint64_t> checkpoint_failures_{0};

  // The version and path of the newest checkpoint this run wrote or resumed from.
  uint64_t checkpointed_version_ ABSL_GUARDED_BY(checkpoint_mu_) = UINT64_MAX;
  std::string checkpointed_path_ ABSL_GUARDED_BY(checkpoint_mu_);
  // For Status, readable without checkpoint_mu_ (held for a whole checkpoint write).
  std::atomic<uint64_t> status_checkpoint_version_{0};
  std::atomic<int64_t> status_checkpoint_unix_ms_{0};
  absl::Mutex loop_mu_;

  // The averaged network: null with averaging off. average_mu_ serialises folds and restores; a
  // pull copies the published snapshot's pointer under it. Never held while taking another lock.
  mutable absl::Mutex average_mu_;
  std::unique_ptr<WeightAverage> average_ ABSL_GUARDED_BY(average_mu_);
  std::unique_ptr<PeriodicTask> average_task_ ABSL_GUARDED_BY(loop_mu_);
};

}  // namespace convoy::ps

#endif  // CONVOY_PARAM_SERVER_CORE_PARAMETER_SERVER_H_
