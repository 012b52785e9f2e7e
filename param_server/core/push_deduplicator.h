// PushDeduplicator: exactly-once pushes. It remembers, per agent, the newest push answered (its
// push_session and sequence) and that answer, so a retry is answered again instead of applied
// again. A new push_session of an agent (a new client, a restarted process) starts its sequence
// space afresh. Sequence 0 is a client without exactly-once: always new, never remembered. Joins do
// not touch it, so a push retried across a rejoin is still recognised. The records are part of each
// checkpoint (SaveTo, Restore), so a push retried across a restart is recognised too.
//
// A part of the server (server_part.h), not thread-safe: the server checks, applies and records
// under its writer's lock, so that two attempts of one push that arrive together still apply once,
// also when one optimizer step drains both.
#ifndef CONVOY_PARAM_SERVER_CORE_PUSH_DEDUPLICATOR_H_
#define CONVOY_PARAM_SERVER_CORE_PUSH_DEDUPLICATOR_H_

#include <cstdint>
#include <map>
#include <string>

#include "common/wire/push_answer.h"
#include "convoy/v1/checkpoint.pb.h"
#include "param_server/core/server_part.h"

namespace convoy::ps {

class PushDeduplicator : public ServerPart {
 public:
  enum class Verdict {
    kNew,         // Not seen: apply it, then Record the answer.
    kRepeat,      // The push last answered: answer it again (Seen::answer).
    kSuperseded,  // Older than the push last answered: refuse it, apply nothing.
  };
  struct Seen {
    Verdict verdict = Verdict::kNew;
    PushAnswer answer;  // For kRepeat: the answer first given.
  };

  Seen Check(const std::string& agent_id, uint64_t push_session, uint64_t sequence);
  // Remembers the answer to a push Check found new. Does nothing for sequence 0.
  void Record(const std::string& agent_id, uint64_t push_session, uint64_t sequence,
              const PushAnswer& answer);

  // Writes every agent's record into a checkpoint's manifest (push_records), in agent order.
  void SaveTo(v1::CheckpointManifest& manifest) const;
  // Replaces the records with a checkpoint's; a manifest without any (an older checkpoint) leaves
  // none. Records without an agent or a sequence are skipped.
  void Restore(const v1::CheckpointManifest& manifest);

  // The same, as a part of the server's checkpoints.
  absl::Status SaveTo(absl::Mutex& mu, CheckpointData& data) const override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    SaveTo(data.manifest);
    return absl::OkStatus();
  }
  absl::Status Restore(absl::Mutex& mu, LoadedCheckpoint& checkpoint) override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    Restore(checkpoint.manifest);
    return absl::OkStatus();
  }

 private:
  struct LastPush {
    uint64_t push_session = 0;
    uint64_t sequence = 0;
    PushAnswer answer;
  };
  std::map<std::string, LastPush> last_push_;
};

}  // namespace convoy::ps

#endif  // CONVOY_PARAM_SERVER_CORE_PUSH_DEDUPLICATOR_H_
