// ServerPart: a piece of the parameter server's state that lives under the server's one writer
// lock, as Reverb's table extensions live under their table's mutex. The server's apply stays
// small: whatever must react to an optimizer step (the target network, the exploration schedule,
// the counters, the apply log, the checkpoint trigger) is a part, and so is whatever a checkpoint
// carries (the optimizer's state, the exactly-once records).
//
// Contract: the server calls
//   - Applied once per optimizer step, under its writer lock `mu`, after the step's version is
//     published and before any push of the step is answered, in version order;
//   - AfterApply for the same step once the server holds none of its locks (in no set order
//     between steps), for parts that take a lock which is held while the writer's lock is taken,
//     as the periodic checkpoint's is (checkpoint_trigger.h);
//   - SaveTo under `mu` while it captures a checkpoint (so every part writes the same version), and
//     Checkpointed once that checkpoint is durable, under the checkpoint lock only;
//   - Restore under `mu` before the server serves, with the checkpoint it resumes from.
// The lock is passed in so that the compiler's thread-safety analysis checks every call (Clang's
// -Wthread-safety, docs/testing.md). A part must be quick and must not call back into the server.
#ifndef CONVOY_PARAM_SERVER_CORE_SERVER_PART_H_
#define CONVOY_PARAM_SERVER_CORE_SERVER_PART_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "param_server/core/checkpointer.h"
#include "param_server/core/weight_store.h"

namespace convoy::ps {

// One push an optimizer step applied.
struct AppliedPush {
  std::string agent_id;
  uint64_t push_session = 0;
  uint64_t sequence = 0;  // 0: a client without exactly-once.
  uint32_t minibatches = 0;
  uint64_t staleness = 0;
};

// One optimizer step: the version it made from the pushes it combined, in the order they were
// summed (the order they were drained in).
struct AppliedStep {
  uint64_t incarnation = 0;
  uint64_t version = 0;
  std::vector<AppliedPush> pushes;
  uint64_t minibatches = 0;          // The pushes' minibatches.
  uint64_t applied_minibatches = 0;  // The run's, this step's included.
  absl::Time at;                     // When the step began.
  absl::Duration step_time;          // The optimizer step and the publish of its weights.
  // The weights the step published (version `version`).
  std::shared_ptr<const WeightSnapshot> published;
};

// Told of every optimizer step, as AfterApply is, by a server it was added to
// (ParameterServer::AddStepObserver): what watches the server from outside it (convoy_ps's
// metrics), with no state of the server's. Must be quick, thread-safe and must not call back into
// the server.
class StepObserver {
 public:
  virtual ~StepObserver() = default;
  virtual void Stepped(const AppliedStep& step) = 0;
};

class ServerPart {
 public:
  virtual ~ServerPart() = default;

  virtual void Applied(absl::Mutex& mu, const AppliedStep& /*step*/)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {}
  virtual void AfterApply(const AppliedStep& /*step*/) {}

  virtual absl::Status SaveTo(absl::Mutex& mu, CheckpointData& /*data*/) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return absl::OkStatus();
  }
  virtual void Checkpointed(uint64_t /*incarnation*/, uint64_t /*version*/) {}
  // `checkpoint` may be taken from (its tensors moved out). Errors: DATA_LOSS naming the
  // checkpoint when its state does not fit the part.
  virtual absl::Status Restore(absl::Mutex& mu, LoadedCheckpoint& /*checkpoint*/)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return absl::OkStatus();
  }
};

}  // namespace convoy::ps

#endif  // CONVOY_PARAM_SERVER_CORE_SERVER_PART_H_
