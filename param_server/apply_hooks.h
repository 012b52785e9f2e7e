// ApplyHook: something that follows the server's applied updates without being part of the apply,
// as Reverb's table extensions follow a table. The apply log is one (apply_log.h).
//
// Contract: the server calls Applied under its writer's lock, after the optimizer step and before
// the new version is published, so hooks see updates once each and in version order; AfterApply
// for the same update once the server holds none of its locks (in no set order between concurrent
// applies), for hooks that take a lock which is held while the writer's lock is taken, as the
// periodic checkpoint's is (checkpoint_trigger.h); Checkpointed after a checkpoint is durable,
// under the checkpoint lock. A hook must be quick and must not call back into the server.
#ifndef CONVOY_PARAM_SERVER_APPLY_HOOKS_H_
#define CONVOY_PARAM_SERVER_APPLY_HOOKS_H_

#include <cstdint>
#include <string>

namespace convoy {

// One applied push.
struct AppliedPush {
  uint64_t incarnation = 0;
  uint64_t version = 0;  // The version the push made.
  std::string agent_id;
  uint64_t push_session = 0;
  uint64_t sequence = 0;  // 0: a client without exactly-once.
  uint32_t minibatches = 0;
  uint64_t staleness = 0;
};

class ApplyHook {
 public:
  virtual ~ApplyHook() = default;
  virtual void Applied(const AppliedPush& push) = 0;
  virtual void AfterApply(const AppliedPush& /*push*/) {}
  virtual void Checkpointed(uint64_t incarnation, uint64_t version) = 0;
};

}  // namespace convoy

#endif  // CONVOY_PARAM_SERVER_APPLY_HOOKS_H_
