#include "param_server/apply_log.h"

#include <fcntl.h>
#include <glog/logging.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "common/files.h"

namespace convoy {

absl::StatusOr<std::unique_ptr<ApplyLog>> ApplyLog::Open(const std::string& path) {
  const int fd = open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError(errno, "cannot open the apply log", path);
  return std::unique_ptr<ApplyLog>(new ApplyLog(path, fd));
}

ApplyLog::~ApplyLog() { close(fd_); }

void ApplyLog::Started(uint64_t incarnation, uint64_t version, uint64_t checkpoint_writer) {
  Append(absl::StrCat(
      "start incarnation=", incarnation, " version=", version,
      checkpoint_writer == 0 ? "" : absl::StrCat(" resumed_from=", checkpoint_writer)));
}

void ApplyLog::Applied(absl::Mutex&, const AppliedStep& step) {
  // One write for the whole step: its lines land together, in summation order.
  std::string lines;
  for (const AppliedPush& push : step.pushes) {
    absl::StrAppend(&lines, "apply incarnation=", step.incarnation, " version=", step.version,
                    " agent=", push.agent_id, " session=", push.push_session,
                    " sequence=", push.sequence, " minibatches=", push.minibatches,
                    " staleness=", push.staleness, "\n");
  }
  lines.pop_back();  // Append ends the last line.
  Append(lines);
}

void ApplyLog::Checkpointed(uint64_t incarnation, uint64_t version) {
  Append(absl::StrCat("checkpoint incarnation=", incarnation, " version=", version));
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

}  // namespace convoy
