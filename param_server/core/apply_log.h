// ApplyLog: an audit trail of what a parameter server applied, one line per event, for checking a
// run after the fact (the chaos test replays it): which push became which version, which versions
// a checkpoint holds, where each start of the server resumed. The records, declared in
// common/support/log_records.txt (apply_log):
//
//   start incarnation=I version=V [resumed_from=W]      (V: the version resumed, 0 fresh; W: the
//                                                        start that wrote that checkpoint, where
//                                                        its manifest says)
//   apply incarnation=I version=V agent=A session=S sequence=Q minibatches=N staleness=T
//   checkpoint incarnation=I version=V                  (after the checkpoint is durable)
//
// One optimizer step that combined K pushes (--max_pushes_per_step) writes K "apply" lines of the
// same version, in the order the step summed them; versions rise by one from step to step.
//
// A start's "checkpoint" line follows the durable write, so a start killed between the two wrote a
// checkpoint its lines never name; resumed_from names its writer all the same.
//
// Each line is one append to a file opened O_APPEND, so lines from several threads never interleave
// and a killed server loses none it wrote. Thread-safe.
#ifndef CONVOY_PARAM_SERVER_CORE_APPLY_LOG_H_
#define CONVOY_PARAM_SERVER_CORE_APPLY_LOG_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "param_server/core/server_part.h"

namespace convoy::ps {

class ApplyLog : public ServerPart {
 public:
  // Opens (creating, or appending to) `path`. Errors: ErrnoError's code naming the path.
  static absl::StatusOr<std::unique_ptr<ApplyLog>> Open(const std::string& path);
  ~ApplyLog() override;
  ApplyLog(const ApplyLog&) = delete;
  ApplyLog& operator=(const ApplyLog&) = delete;

  // One call per record of the format above; each appends its line. A failed write is logged once;
  // the server carries on. The format is read by tests/cluster/chaos_check.py: change both
  // together.
  // `checkpoint_writer`: the start that wrote the checkpoint resumed from (0: fresh, or unknown).
  void Started(uint64_t incarnation, uint64_t version, uint64_t checkpoint_writer = 0);
  void Applied(absl::Mutex& mu, const AppliedStep& step) override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  void Checkpointed(uint64_t incarnation, uint64_t version) override;

 private:
  void Append(absl::string_view line);

  ApplyLog(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  const std::string path_;
  const int fd_;
  std::atomic<bool> warned_{false};
};

}  // namespace convoy::ps

#endif  // CONVOY_PARAM_SERVER_CORE_APPLY_LOG_H_
