// Checkpointer: atomic, verifiable checkpoints of the parameter server's whole state.
//
// A checkpoint is a directory `ckpt-<version, 20 digits>` holding
//   weights.pt    online weights, a {parameter name: tensor} dict in torch.save's format (Python's
//   torch.load
//                 reads it; see docs/architecture.md),
//   target.pt     the target-network weights, same format,
//   average.pt    the averaged network (weight_average.h), same format; from a server that
//   averages, optimizer.pt  the optimizer's state (LibTorch archive), MANIFEST
//   convoy.v1.CheckpointManifest in protobuf text format: version, fingerprint, counters,
//                 hyper-parameters and each file's size and SHA-256.
// It is written to a hidden temporary directory (files fsynced, MANIFEST last), renamed into place,
// and the parent directory fsynced, so a crash leaves either the whole checkpoint or none. The
// newest checkpoint is the valid manifest with the highest version; file times are never consulted.
//
// A checkpoint directory belongs to one run: every manifest names its run (run_id, made at the
// run's first start and kept across --resume). A Checkpointer writes, prunes and replaces only its
// own run's checkpoints; names in the directory that are not checkpoints (`ckpt-x`, a version past
// 64 bits, files) are skipped.
#ifndef CONVOY_PARAM_SERVER_CORE_CHECKPOINTER_H_
#define CONVOY_PARAM_SERVER_CORE_CHECKPOINTER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model/model_registry.h"
#include "common/model/shard_map.h"
#include "convoy/v1/checkpoint.pb.h"
#include "param_server/core/lineage.h"
#include "param_server/core/weight_store.h"

namespace convoy::ps {

// What a checkpoint says of the shard it holds: shard `index` of `map`, a split of `model`.
v1::ShardInfo ShardInfoOf(const ShardMap& map, uint32_t index, const ModelInfo& model);

// What goes into a checkpoint. `manifest` carries everything but `files`, which Write fills in.
struct CheckpointData {
  v1::CheckpointManifest manifest;
  std::shared_ptr<const WeightSnapshot> weights;
  std::shared_ptr<const WeightSnapshot> target;
  std::shared_ptr<const WeightSnapshot> average;  // Null: none written.
  std::string optimizer_state;
};

struct LoadedCheckpoint {
  std::string path;
  v1::CheckpointManifest manifest;
  std::vector<float> weights;
  std::vector<float> target;
  std::vector<float> average;  // Empty when the checkpoint holds none.
  std::string optimizer_state;
};

// Thread-compatible: one writer at a time (the parameter server serialises checkpoints).
class Checkpointer {
 public:
  // `keep` >= 1 newest checkpoints of this run are kept; older ones of this run are deleted after
  // each successful write. `model` is the model every checkpoint here must hold. `run_id` names the
  // run that writes (a new one by default; see AdoptRun).
  Checkpointer(std::string directory, int keep, ModelInfo model, std::string run_id = NewRunId());

  // A new run id: the start time and 64 random bits, e.g. 20261201T093000Z-1f2e3d4c5b6a7988.
  static std::string NewRunId();

  // For a run that has not started yet in `directory`: OK when the directory is missing or holds no
  // valid checkpoint; else FAILED_PRECONDITION naming the newest checkpoint (path, version, run)
  // and the two ways on (--resume, or another directory). Reads only.
  static absl::Status CheckUnused(const std::string& directory);

  // Continues the run of a resumed checkpoint: its run id becomes this writer's. A checkpoint
  // written before run ids existed (none in its manifest) keeps this writer's new id, and the
  // directory's other checkpoints without one count as this run's from then on.
  void AdoptRun(const v1::CheckpointManifest& resumed);
  const std::string& run_id() const { return run_id_; }

  // The starts journal, `starts` in the directory: one line per resumed start of a run, appended
  // and fsynced before the start serves. It names the starts killed before they wrote a checkpoint.
  // Errors: the failing file operation with its path.
  absl::Status RecordResumedStart(const ResumedStart& start);
  // This run's resumed starts, oldest first; none when there is no journal. A line that does not
  // parse (a torn append) is skipped.
  std::vector<ResumedStart> ResumedStarts() const;

  // Writes `data` atomically as this run's and returns the checkpoint's path. When this run already
  // wrote this version, it is left as it is and its path returned. A torn or corrupt directory of
  // the version is replaced. Errors: FAILED_PRECONDITION when another run's valid checkpoint holds
  // the version (nothing is written or removed); the failing file operation with its path and errno
  // text, the previous checkpoints intact.
  absl::StatusOr<std::string> Write(const CheckpointData& data);

  // The newest checkpoint (of any run) whose manifest parses and whose files match their checksums.
  // A torn or corrupt one, and a name that is not a checkpoint's, is skipped with a warning naming
  // it. NOT_FOUND when there is none; FAILED_PRECONDITION, naming both fingerprints, when it holds
  // another model.
  absl::StatusOr<LoadedCheckpoint> LoadNewest() const;

  // Loads one checkpoint directory of `model`, verifying it. Errors: DATA_LOSS for a bad manifest,
  // checksum or tensor layout; NOT_FOUND for a missing file; FAILED_PRECONDITION, naming both
  // fingerprints, when the checkpoint holds another model, and naming both shards when `shard` is
  // given and the checkpoint holds another shard or another split (a manifest without one holds the
  // whole model, shard 0 of 1).
  static absl::StatusOr<LoadedCheckpoint> Load(const std::string& path, const ModelInfo& model,
                                               const v1::ShardInfo* shard = nullptr);

  // The whole model's weights from what `path` names, for starting a run from another one's
  // (convoy_ps
  // --init_checkpoint), with any number of shards:
  //   - one checkpoint directory (a MANIFEST in it): Load;
  //   - a run's checkpoint directory (ckpt-* in it): its newest checkpoint;
  //   - a sharded run's checkpoint set (shard-0, shard-1, ... in it): each shard's newest
  //   checkpoint, which
  //     must be that shard of that many, assembled in shard order (weights and target).
  // The manifest returned is the first (or only) one's, its parameter_count the whole model's and
  // its shard cleared. Errors: those of Load and LoadNewest, the shard's directory named.
  static absl::StatusOr<LoadedCheckpoint> LoadWholeModel(const std::string& path,
                                                         const ModelInfo& model);

  // The shard every checkpoint here must hold (LoadNewest refuses another); by default shard 0
  // of 1.
  void set_shard(const v1::ShardInfo& shard) { shard_ = shard; }

  // Parses and verifies a checkpoint directory's MANIFEST and the files it lists.
  static absl::StatusOr<v1::CheckpointManifest> VerifyManifest(const std::string& path);

  // Parses manifest text. Errors: DATA_LOSS naming what is wrong.
  static absl::StatusOr<v1::CheckpointManifest> ParseManifest(const std::string& text);

  const std::string& directory() const { return directory_; }

 private:
  struct Found {
    uint64_t version = 0;
    std::string path;
    std::string run_id;
    bool operator>(const Found& other) const { return version > other.version; }
  };
  // Every checkpoint directory of `directory` with a parsable manifest, newest first; with `warn`,
  // names that look like a checkpoint's but are not, and manifests that do not parse, are logged.
  static std::vector<Found> Scan(const std::string& directory, bool warn);
  bool Ours(const std::string& run_id) const;
  void Prune() const;

  std::string directory_;
  int keep_;
  ModelInfo model_;
  v1::ShardInfo shard_ = [] {
    v1::ShardInfo whole;
    whole.set_num_shards(1);
    return whole;
  }();
  std::string run_id_;
  bool legacy_is_ours_ =
      false;  // Checkpoints without a run id belong to this run (resumed from one).
};

}  // namespace convoy::ps

#endif  // CONVOY_PARAM_SERVER_CORE_CHECKPOINTER_H_
