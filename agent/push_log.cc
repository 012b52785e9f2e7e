#include "agent/push_log.h"

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"

namespace convoy {
namespace {

std::string UnixSeconds() { return absl::StrFormat("%.3f", absl::ToUnixMillis(absl::Now()) / 1e3); }

}  // namespace

absl::StatusOr<std::unique_ptr<PushLog>> PushLog::Open(const std::string& path) {
  FILE* file = std::fopen(path.c_str(), "a");
  if (file == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("cannot open the push log ", path));
  }
  return std::unique_ptr<PushLog>(new PushLog(file));
}

PushLog::~PushLog() { std::fclose(file_); }

void PushLog::Started(const std::string& agent_id) {
  Write(absl::StrCat("start agent=", agent_id, " pid=", getpid(), " time=", UnixSeconds()));
}

void PushLog::Trained(const std::string& agent_id, uint64_t minibatches) {
  Write(absl::StrCat("trained agent=", agent_id, " minibatches=", minibatches,
                     " time=", UnixSeconds()));
}

void PushLog::Answered(const LoggedPush& push, const PushAnswer& answer) {
  Write(absl::StrCat(
      "push agent=", push.agent_id, " session=", push.session, " sequence=", push.sequence,
      " accepted=", answer.accepted ? 1 : 0, " repeated=", answer.repeated ? 1 : 0,
      " reason=", v1::RejectReason_Name(answer.reason), " incarnation=", answer.incarnation,
      " version=", answer.version, " shard=", push.shard, " minibatches=", push.minibatches,
      " base_incarnation=", push.base_incarnation, " base_version=", push.base_version));
}

void PushLog::Ended(const std::string& agent_id, bool in_step, uint64_t minibatches) {
  Write(absl::StrCat("end agent=", agent_id, " in_step=", in_step ? 1 : 0,
                     " minibatches=", minibatches, " time=", UnixSeconds()));
}

void PushLog::Write(const std::string& line) {
  absl::MutexLock lock(&mu_);
  std::fprintf(file_, "%s\n", line.c_str());
  std::fflush(file_);
}

}  // namespace convoy
