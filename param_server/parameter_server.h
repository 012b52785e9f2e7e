// ParameterServer: the transport-free core of convoy_ps. It owns the master weights, the optimizer, the
// staleness policy, the target network, the exploration schedule, the counters and the checkpoints. The gRPC
// service (service.h) is a thin edge over it.
#ifndef CONVOY_PARAM_SERVER_PARAMETER_SERVER_H_
#define CONVOY_PARAM_SERVER_PARAMETER_SERVER_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/exploration.h"
#include "common/model_registry.h"
#include "common/periodic_task.h"
#include "common/rates.h"
#include "common/run_defaults.h"
#include "common/run_settings.h"
#include "common/shard_map.h"
#include "convoy/v1/parameter_server.pb.h"
#include "param_server/agent_registry.h"
#include "param_server/apply_hooks.h"
#include "param_server/apply_log.h"
#include "param_server/checkpoint_trigger.h"
#include "param_server/checkpointer.h"
#include "param_server/lineage.h"
#include "param_server/optimizer.h"
#include "param_server/push_assembler.h"
#include "param_server/push_deduplicator.h"
#include "param_server/push_outcome.h"
#include "param_server/staleness_policy.h"
#include "param_server/target_network.h"
#include "param_server/weight_average.h"
#include "param_server/weight_store.h"

namespace convoy {

// Every default here is the one its convoy_ps flag shows (the flags are declared from this struct).
// RunSettings: the learner's settings the server hands to agents (RunConfig), which they adopt on
// Join; target_update_frequency (applied minibatches between target snapshots) among them.
struct ParameterServerOptions : RunSettings {
  std::string model = run_defaults::kServerModel;
  int num_actions = kDefaultNumActions;
  uint64_t seed = 1;
  std::string init_checkpoint;  // A checkpoint directory to take the initial weights from.
  std::string checkpoint_dir;   // Empty: no checkpoints.
  // Start from the newest valid checkpoint in checkpoint_dir, if any. Without it, a checkpoint_dir that
  // holds checkpoints is refused (FAILED_PRECONDITION): they belong to another run.
  bool resume = false;
  int keep_checkpoints = 5;
  uint64_t checkpoint_every_updates = 0;             // 0: off.
  absl::Duration checkpoint_every = absl::Seconds(60);  // 0: off.
  OptimizerOptions optimizer;
  int64_t max_staleness = -1;  // < 0: accept any.
  bool staleness_lr_scaling = false;
  // The averaged network (NETWORK_AVERAGE, weight_average.h): an exponential average of the online
  // weights over this many applied minibatches (0: none), folded every average_every off the apply
  // path.
  uint64_t average_horizon = run_defaults::kAverageHorizon;
  absl::Duration average_every = absl::Seconds(1);
  ExplorationOptions exploration;
  // Empty: none. Otherwise every start, applied update and checkpoint is appended here (ApplyLog).
  std::string apply_log;
  // Sharding (common/shard_map.h): this server serves range shard_index of the model split num_shards
  // ways: its slice of the weights, of the target network and of the optimizer state, with versions,
  // exactly-once records and checkpoints of its own. 1 shard: the whole model.
  uint32_t num_shards = 1;
  uint32_t shard_index = 0;
};

// Thread-safe. Applies are serialised (one writer); snapshots and status never wait for an apply.
class ParameterServer {
 public:
  // Builds the model's initial state: the newest valid checkpoint when resuming, else --init_checkpoint's
  // weights, else weights drawn from the seed. Errors: INVALID_ARGUMENT for bad options; FAILED_PRECONDITION
  // when a checkpoint belongs to another model (naming both fingerprints); DATA_LOSS for an unreadable
  // --init_checkpoint.
  static absl::StatusOr<std::unique_ptr<ParameterServer>> Create(const ParameterServerOptions& options);
  ~ParameterServer();

  // Registers an agent. Errors: FAILED_PRECONDITION naming both fingerprints on a model mismatch.
  absl::StatusOr<v1::JoinResponse> Join(const v1::JoinRequest& request);

  // Applies a validated, complete push (the values are consumed), or rejects it by policy: STALE or
  // AHEAD by version; BASE_NOT_IN_LINEAGE when header.base_incarnation is set, not this server
  // start's, and base_version is not a version of that start which this server's weights descend
  // from (lineage()): a push computed on a version the lineage holds is decided as one of this
  // start's. Exactly once: with a sequence, a push of the (agent_id, push_session, sequence) last
  // answered gets that answer again (repeated=true) and one older than it is SUPERSEDED; neither
  // applies anything. A new push_session of an agent (a new client, a restarted process) starts its
  // sequence space afresh. Join changes nothing here, so a push retried across a rejoin is still
  // recognised; the records are checkpointed with the weights and restored on resume, so one
  // retried across a restart is too.
  PushOutcome Apply(const PushHeader& header, std::vector<float>& values);
  // An older client's push: no incarnation, no sequence.
  PushOutcome Apply(const std::string& agent_id, uint64_t base_version, uint32_t minibatch_count,
                    std::vector<float>& values);

  // The snapshot a pull streams. Never waits for an apply. Null for NETWORK_AVERAGE when averaging
  // is off.
  std::shared_ptr<const WeightSnapshot> Snapshot(v1::Network network) const;

  // Folds the newest online weights into the averaged network now (the background task does it
  // every average_every once StartPeriodicTasks ran; a checkpoint does it first). Returns whether
  // the average changed; false when averaging is off.
  bool FoldAverage();

  // Counts a push rejected for malformed input (policy rejections are counted by Apply).
  void CountRejection(const std::string& agent_id, v1::RejectReason reason);
  void CountBytes(uint64_t in, uint64_t out);
  void CountPull(const std::string& agent_id, bool not_newer);
  void CountUnauthenticated() { unauthenticated_.fetch_add(1, std::memory_order_relaxed); }

  v1::StatusResponse Status() const;

  // Writes a checkpoint of a consistent state now and returns its path; when this run already holds a
  // checkpoint of the current version, that one's path, and nothing is written or counted. Errors:
  // FAILED_PRECONDITION without --checkpoint_dir, or when another run's checkpoint holds the version; the
  // file error otherwise (the previous checkpoints stay intact, training goes on).
  absl::StatusOr<std::string> Checkpoint();

  // Starts the background threads: the one that checkpoints every N updates and/or every T seconds
  // (each measured from the previous periodic checkpoint; none without --checkpoint_dir or with
  // both triggers off) and the one that folds the averaged network every average_every (none with
  // averaging off). Does nothing when already started. The destructor stops them, after finishing a
  // checkpoint in progress.
  void StartPeriodicTasks();

  // What this server serves: the model itself, or for a shard its slice (parameter_count the slice's
  // size, one layout slot), with the model's spec and fingerprint.
  const ModelInfo& model() const { return model_; }
  const ModelInfo& full_model() const { return full_model_; }
  const ShardMap& shard_map() const { return shard_map_; }
  // This shard on the wire and in checkpoints.
  v1::ShardInfo shard_info() const;
  uint64_t incarnation() const { return incarnation_; }
  // The server starts whose versions the weights descend from. Fixed once Create returns.
  const Lineage& lineage() const { return lineage_; }
  // The run the checkpoints belong to: new at a first start, the resumed checkpoint's with --resume.
  const std::string& run_id() const { return run_id_; }
  uint64_t version() const { return store_->version(); }
  const ParameterServerOptions& options() const { return options_; }
  v1::RunConfig RunConfigFor(uint32_t agent_index) const;

 private:
  // Counts read by Status() without touching apply_mu_.
  struct Counters {
    uint64_t updates_applied = 0;
    uint64_t applied_minibatches = 0;
    double epsilon = 1.0;
    uint64_t pulls_served = 0;
    uint64_t pulls_not_newer = 0;
    uint64_t checkpoints_written = 0;
    uint64_t checkpoint_failures = 0;
    uint64_t repeated_pushes = 0;
    std::map<v1::RejectReason, uint64_t> rejections;

    // A checkpoint carries the applied updates and minibatches and the rejections over to a
    // resumed run; the other counts are this process's and start at 0.
    void SaveTo(v1::CheckpointManifest& manifest) const;
    void Restore(const v1::CheckpointManifest& manifest);
  };
  ParameterServer(const ParameterServerOptions& options, ModelInfo full_model, ShardMap map);
  absl::Status Initialise();
  // The periodic checkpoint, when one of checkpoint_trigger_'s triggers is due.
  void PeriodicCheckpoint();

  const ParameterServerOptions options_;
  const ModelInfo full_model_;
  const ShardMap shard_map_;
  const ModelInfo model_;  // Served: full_model_, or this shard's slice of it.
  const uint64_t incarnation_;
  std::string run_id_;  // Set once by Initialise.
  Lineage lineage_;     // Set once by Initialise.
  const absl::Time started_;
  StalenessPolicy staleness_;
  std::unique_ptr<WeightStore> store_;
  std::unique_ptr<Checkpointer> checkpointer_;
  std::unique_ptr<ApplyLog> apply_log_;  // Null without options.apply_log.
  // Told of every applied update and checkpoint (apply_hooks.h); fixed once Initialise returns.
  std::vector<ApplyHook*> hooks_;

  // The single writer: optimizer steps, target refreshes and checkpoint captures. The version is
  // the store's: only this writer publishes, so under apply_mu_ it is the version of the master
  // weights.
  mutable absl::Mutex apply_mu_ ABSL_ACQUIRED_BEFORE(stats_mu_);
  std::unique_ptr<FlatOptimizer> optimizer_ ABSL_GUARDED_BY(apply_mu_);
  std::unique_ptr<ExplorationSchedule> exploration_ ABSL_GUARDED_BY(apply_mu_);
  PushDeduplicator dedup_ ABSL_GUARDED_BY(apply_mu_);

  // The target is refreshed and the agents' answers counted under stats_mu_ (their own locks nest
  // inside it), so Status sees them together with the counters.
  TargetNetwork target_;
  AgentRegistry agents_;

  mutable absl::Mutex stats_mu_;
  Counters counters_ ABSL_GUARDED_BY(stats_mu_);
  // Accepted pushes; mutable because reading the rate drops the events that left its window.
  mutable RateMeter apply_rate_ ABSL_GUARDED_BY(stats_mu_);
  std::atomic<uint64_t> bytes_in_{0};
  std::atomic<uint64_t> bytes_out_{0};
  std::atomic<uint64_t> unauthenticated_{0};

  absl::Mutex checkpoint_mu_;  // One checkpoint write at a time.
  // The version and path of the newest checkpoint this run wrote or resumed from.
  uint64_t checkpointed_version_ ABSL_GUARDED_BY(checkpoint_mu_) = UINT64_MAX;
  // For Status, readable without checkpoint_mu_ (held for a whole checkpoint write).
  std::atomic<uint64_t> status_checkpoint_version_{0};
  std::atomic<int64_t> status_checkpoint_unix_ms_{0};
  std::string checkpointed_path_ ABSL_GUARDED_BY(checkpoint_mu_);
  // Runs PeriodicCheckpoint when --checkpoint_every or --checkpoint_every_updates is due; a hook
  // with --checkpoint_dir.
  CheckpointTrigger checkpoint_trigger_;
  absl::Mutex loop_mu_;

  // The averaged network: null with averaging off. average_mu_ serialises folds and restores; a
  // pull copies the published snapshot's pointer under it. Never held while taking another lock.
  mutable absl::Mutex average_mu_ ABSL_ACQUIRED_AFTER(stats_mu_);
  std::unique_ptr<WeightAverage> average_ ABSL_GUARDED_BY(average_mu_);
  std::unique_ptr<PeriodicTask> average_task_ ABSL_GUARDED_BY(loop_mu_);
};

}  // namespace convoy

#endif  // CONVOY_PARAM_SERVER_PARAMETER_SERVER_H_
