// PushLog: an agent's audit trail of its pushes, one key=value line per event, for checking a run
// after the fact against the parameter server's apply log (tests/cluster/chaos_check.py and
// chaos_agents_check.py). The records, declared in common/support/log_records.txt (push_log):
//
//   start agent=A pid=P time=T
//       a process of agent A began;
//   trained agent=A minibatches=N time=T
//       N minibatches trained so far by this process;
//   push agent=A session=S sequence=Q accepted=0|1 repeated=0|1 reason=R incarnation=I version=V
//        shard=K minibatches=M base_incarnation=J base_version=W
//       shard K answered push Q of session S, computed on version W of start J (one line);
//   end agent=A in_step=0|1 minibatches=N time=T
//       the process ended its run cleanly.
//
// T is Unix time in seconds. A `push` line is written for every answer, a resent push's too, so a
// push answered twice (its reply lost, then a repeat) has two lines. Each line is written whole and
// flushed at once, so a killed agent leaves every line it wrote. Thread-safe: a sharded session's
// shards answer on threads of their own.
#ifndef CONVOY_AGENT_CLIENT_PUSH_LOG_H_
#define CONVOY_AGENT_CLIENT_PUSH_LOG_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "agent/client/sync_observer.h"

namespace convoy::agent {

// A SyncObserver (agent/client/sync_observer.h) that writes what it observes, with the process's
// start and end, which its binary reports.
class PushLog final : public SyncObserver {
 public:
  // Opens `path` for appending (creating it). Errors: INVALID_ARGUMENT naming the path.
  static absl::StatusOr<std::unique_ptr<PushLog>> Open(const std::string& path);
  ~PushLog();
  PushLog(const PushLog&) = delete;
  PushLog& operator=(const PushLog&) = delete;

  void Started(const std::string& agent_id);
  // `minibatches`: trained so far by this process, counting the one just trained.
  void Trained(const std::string& agent_id, uint64_t minibatches) override;
  void Answered(const LoggedPush& push, const PushAnswer& answer) override;
  void Ended(const std::string& agent_id, bool in_step, uint64_t minibatches);

 private:
  explicit PushLog(FILE* file) : file_(file) {}
  void Write(const std::string& line);

  absl::Mutex mu_;
  FILE* const file_ ABSL_PT_GUARDED_BY(mu_);
};

}  // namespace convoy::agent

#endif  // CONVOY_AGENT_CLIENT_PUSH_LOG_H_
