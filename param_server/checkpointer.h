// Checkpointer: atomic, verifiable checkpoints of the parameter server's whole state.
//
// A checkpoint is a directory `ckpt-<version, 20 digits>` holding
//   weights.pt    online weights, a {parameter name: tensor} dict in torch.save's format (Python's torch.load
//                 reads it; see docs/architecture.md),
//   target.pt     the target-network weights, same format,
//   optimizer.pt  the optimizer's state (LibTorch archive),
//   MANIFEST      convoy.v1.CheckpointManifest in protobuf text format: version, fingerprint, counters,
//                 hyper-parameters and each file's size and SHA-256.
// It is written to a hidden temporary directory (files fsynced, MANIFEST last), renamed into place, and the
// parent directory fsynced, so a crash leaves either the whole checkpoint or none. The newest checkpoint is
// the valid manifest with the highest version; file times are never consulted.
#ifndef CONVOY_PARAM_SERVER_CHECKPOINTER_H_
#define CONVOY_PARAM_SERVER_CHECKPOINTER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model_registry.h"
#include "convoy/v1/checkpoint.pb.h"
#include "param_server/weight_store.h"

namespace convoy {

// What goes into a checkpoint. `manifest` carries everything but `files`, which Write fills in.
struct CheckpointData {
  v1::CheckpointManifest manifest;
  std::shared_ptr<const WeightSnapshot> weights;
  std::shared_ptr<const WeightSnapshot> target;
  std::string optimizer_state;
};

struct LoadedCheckpoint {
  std::string path;
  v1::CheckpointManifest manifest;
  std::vector<float> weights;
  std::vector<float> target;
  std::string optimizer_state;
};

// Thread-compatible: one writer at a time (the parameter server serialises checkpoints).
class Checkpointer {
 public:
  // `keep` >= 1 newest checkpoints are kept; older ones are deleted after each successful write. `model` is
  // the model every checkpoint here must hold.
  Checkpointer(std::string directory, int keep, ModelInfo model);

  // Writes `data` atomically and returns the checkpoint's path. A checkpoint of the same version that already
  // exists is left as it is. Errors: the failing file operation with its path and errno text; the previous
  // checkpoints stay intact.
  absl::StatusOr<std::string> Write(const CheckpointData& data);

  // The newest checkpoint whose manifest parses and whose files match their checksums. A torn or corrupt one
  // is skipped with a warning naming it. NOT_FOUND when there is none; FAILED_PRECONDITION, naming both
  // fingerprints, when it holds another model.
  absl::StatusOr<LoadedCheckpoint> LoadNewest() const;

  // Loads one checkpoint directory of `model`, verifying it. Errors: DATA_LOSS for a bad manifest, checksum
  // or tensor layout; NOT_FOUND for a missing file; FAILED_PRECONDITION, naming both fingerprints, when the
  // checkpoint holds another model.
  static absl::StatusOr<LoadedCheckpoint> Load(const std::string& path, const ModelInfo& model);

  // Parses and verifies a checkpoint directory's MANIFEST and the files it lists.
  static absl::StatusOr<v1::CheckpointManifest> VerifyManifest(const std::string& path);

  // Parses manifest text. Errors: DATA_LOSS naming what is wrong.
  static absl::StatusOr<v1::CheckpointManifest> ParseManifest(const std::string& text);

  const std::string& directory() const { return directory_; }

 private:
  // (version, path) of every checkpoint directory with a valid manifest, newest first.
  std::vector<std::pair<uint64_t, std::string>> ValidCheckpoints() const;
  void Prune() const;

  std::string directory_;
  int keep_;
  ModelInfo model_;
};

}  // namespace convoy

#endif  // CONVOY_PARAM_SERVER_CHECKPOINTER_H_
