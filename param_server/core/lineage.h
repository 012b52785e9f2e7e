// Lineage: the server starts (incarnations) whose versions a server's weights descend from. Each
// start made versions (after_version, upto_version] of them, and served after_version, the one it
// started at; a resumed start carries the segments of the checkpoint it resumed from, and its own
// checkpoints add its segment up to their version. A push computed on a version the lineage holds
// was computed on these very weights, whichever start served them; one computed on another version
// of a start (applied after its last checkpoint, lost when it was killed) or of a start the lineage
// never had (another run) was not.
//
// Thread-safe to read: fixed before the server serves (Start, Restore), const after.
#ifndef CONVOY_PARAM_SERVER_CORE_LINEAGE_H_
#define CONVOY_PARAM_SERVER_CORE_LINEAGE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "convoy/v1/checkpoint.pb.h"

namespace convoy::ps {

// A start that resumed from a checkpoint: it served `version`, the checkpoint's, which `writer`
// wrote. Recorded when it starts (Checkpointer::RecordResumedStart), so that a start killed before
// it wrote a checkpoint of its own, which no manifest names, is known all the same.
struct ResumedStart {
  uint64_t incarnation = 0;
  uint64_t version = 0;
  uint64_t writer = 0;
};

class Lineage {
 public:
  // This start: `incarnation`, from `version` (0 for a fresh run, the resumed checkpoint's else).
  void Start(uint64_t incarnation, uint64_t version);
  // Takes the earlier starts' segments from the checkpoint this start resumed from, up to its
  // version. Returns false when the manifest has none (written before lineages were kept): then
  // only this start's own versions are known.
  bool Restore(const v1::CheckpointManifest& manifest);
  // Adds each start of `starts` that no manifest names and that resumed at a version this lineage
  // holds: a push computed on that version by its agents was computed on these very weights.
  void AddResumedStarts(const std::vector<ResumedStart>& starts);
  // Writes the earlier starts' segments and this start's, up to `version` (the checkpoint's).
  void SaveTo(uint64_t version, v1::CheckpointManifest& manifest) const;

  // The start that wrote `manifest` (its lineage's newest segment), 0 when the manifest has no
  // lineage.
  static uint64_t WriterOf(const v1::CheckpointManifest& manifest);

  // Whether `version` of `incarnation`, a start before this one, is a version of these weights.
  bool HoldsEarlier(uint64_t incarnation, uint64_t version) const;
  // For messages: e.g. "incarnation 12 versions 0..40, incarnation 34 versions 40..52, this start
  // from 52" (the last few starts; the number of earlier ones).
  std::string Describe() const;

 private:
  struct Segment {
    uint64_t incarnation = 0;
    uint64_t after_version = 0;
    uint64_t upto_version = 0;
  };
  std::vector<Segment> earlier_;  // Oldest first.
  uint64_t incarnation_ = 0;
  uint64_t start_version_ = 0;
};

}  // namespace convoy::ps

#endif  // CONVOY_PARAM_SERVER_CORE_LINEAGE_H_
