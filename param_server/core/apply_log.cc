#include "param_server/core/apply_log.h"

#include <fcntl.h>
#include <glog/logging.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "common/support/files.h"
#include "common/support/log_record.h"

namespace convoy::ps {

absl::StatusOr<std::unique_ptr<ApplyLog>> ApplyLog::Open(const std::string& path) {
  const int fd = open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError(errno, "cannot open the apply log", path);
  return std::unique_ptr<ApplyLog>(new ApplyLog(path, fd));
}

ApplyLog::~ApplyLog() { close(fd_); }

void ApplyLog::Started(uint64_t incarnation, uint64_t version, uint64_t checkpoint_writer) {
  LogRecord record("apply_log", "start");
  record.Add("incarnation", incarnation).Add("version", version);
  if (checkpoint_writer != 0) record.Add("resumed_from", checkpoint_writer);
  Append(record.Line());
}

void ApplyLog::Applied(absl::Mutex&, const AppliedStep& step) {
  // One write for the whole step: its lines land together, in summation order.
  std::string lines;
  for (const AppliedPush& push : step.pushes) {
    absl::StrAppend(&lines,
                    LogRecord("apply_log", "apply")
                        .Add("incarnation", step.incarnation)
                        .Add("version", step.version)
                        .Add("agent", push.agent_id)
                        .Add("session", push.push_session)
                        .Add("sequence", push.sequence)
                        .Add("minibatches", push.minibatches)
                        .Add("staleness", push.staleness)
                        .Line(),
                    "\n");
  }
  lines.pop_back();  // Append ends the last line.
  Append(lines);
}

void ApplyLog::Checkpointed(uint64_t incarnation, uint64_t version) {
  Append(LogRecord("apply_log", "checkpoint")
             .Add("incarnation", incarnation)
             .Add("version", version)
             .Line());
}

void ApplyLog::Append(absl::string_view line) {
  const std::string record = absl::StrCat(line, "\n");
  // One write(2) of the whole line: O_APPEND makes it land whole, after every other.
  const ssize_t written = write(fd_, record.data(), record.size());
  if (written == static_cast<ssize_t>(record.size())) return;
  if (!warned_.exchange(true)) {
    const std::string why = written < 0
                                ? std::string(ErrnoError(errno, "write failed", path_).message())
                                : "short write";
    LOG(WARNING) << "apply log " << path_ << ": " << why << "; later lines may be missing";
  }
}

}  // namespace convoy::ps
