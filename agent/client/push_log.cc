#include "agent/client/push_log.h"

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/support/log_record.h"

namespace convoy::agent {
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
  Write(LogRecord("push_log", "start")
            .Add("agent", agent_id)
            .Add("pid", getpid())
            .Add("time", UnixSeconds())
            .Line());
}

void PushLog::Trained(const std::string& agent_id, uint64_t minibatches) {
  Write(LogRecord("push_log", "trained")
            .Add("agent", agent_id)
            .Add("minibatches", minibatches)
            .Add("time", UnixSeconds())
            .Line());
}

void PushLog::Answered(const LoggedPush& push, const PushAnswer& answer) {
  Write(LogRecord("push_log", "push")
            .Add("agent", push.agent_id)
            .Add("session", push.session)
            .Add("sequence", push.sequence)
            .Add("accepted", answer.accepted ? 1 : 0)
            .Add("repeated", answer.repeated ? 1 : 0)
            .Add("reason", v1::RejectReason_Name(answer.reason))
            .Add("incarnation", answer.incarnation)
            .Add("version", answer.version)
            .Add("shard", push.shard)
            .Add("minibatches", push.minibatches)
            .Add("base_incarnation", push.base_incarnation)
            .Add("base_version", push.base_version)
            .Line());
}

void PushLog::Ended(const std::string& agent_id, bool in_step, uint64_t minibatches) {
  Write(LogRecord("push_log", "end")
            .Add("agent", agent_id)
            .Add("in_step", in_step ? 1 : 0)
            .Add("minibatches", minibatches)
            .Add("time", UnixSeconds())
            .Line());
}

void PushLog::Write(const std::string& line) {
  absl::MutexLock lock(&mu_);
  std::fprintf(file_, "%s\n", line.c_str());
  std::fflush(file_);
}

}  // namespace convoy::agent
