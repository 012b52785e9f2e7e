// PushLog: the agent's audit trail that the chaos checkers (tests/cluster/chaos_check.py,
// chaos_agents_check.py) read against the servers' apply logs.
#include "agent/client/push_log.h"

#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "tests/catch.h"

namespace convoy::agent {
namespace {

std::string TempPath() {
  char dir[] = "/tmp/push_log_test.XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  return std::string(dir) + "/pushes.log";
}

std::vector<std::string> Lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST_CASE(
    "The push log writes each record as one key=value line, each shard's answer with its "
    "minibatches") {
  const std::string path = TempPath();
  {
    absl::StatusOr<std::unique_ptr<PushLog>> log = PushLog::Open(path);
    REQUIRE(log.ok());
    (*log)->Started("agent-1");
    (*log)->Trained("agent-1", 1);
    PushAnswer applied;
    applied.accepted = true;
    applied.incarnation = 7;
    applied.version = 12;
    (*log)->Answered({"agent-1", 99, 3, 1, 4, 7, 11}, applied);
    PushAnswer refused;
    refused.reason = v1::REJECT_REASON_WRONG_INCARNATION;
    refused.incarnation = 8;
    refused.version = 10;
    (*log)->Answered({"agent-1", 99, 4, 0, 2}, refused);
    (*log)->Ended("agent-1", true, 1);
  }
  const std::vector<std::string> lines = Lines(path);
  REQUIRE(lines.size() == 5);
  CHECK(absl::StartsWith(lines[0], "start agent=agent-1 pid="));
  CHECK(absl::StartsWith(lines[1], "trained agent=agent-1 minibatches=1 time="));
  CHECK(lines[2] ==
        "push agent=agent-1 session=99 sequence=3 accepted=1 repeated=0 "
        "reason=REJECT_REASON_UNSPECIFIED incarnation=7 version=12 shard=1 minibatches=4 "
        "base_incarnation=7 base_version=11");
  CHECK(lines[3] ==
        "push agent=agent-1 session=99 sequence=4 accepted=0 repeated=0 "
        "reason=REJECT_REASON_WRONG_INCARNATION incarnation=8 version=10 shard=0 minibatches=2 "
        "base_incarnation=0 base_version=0");
  CHECK(absl::StartsWith(lines[4], "end agent=agent-1 in_step=1 minibatches=1 time="));
  unlink(path.c_str());
}

TEST_CASE("A second process appends to the push log instead of truncating it") {
  const std::string path = TempPath();
  for (int process = 0; process < 2; ++process) {
    absl::StatusOr<std::unique_ptr<PushLog>> log = PushLog::Open(path);
    REQUIRE(log.ok());
    (*log)->Started("agent-1");
  }
  CHECK(Lines(path).size() == 2);
  unlink(path.c_str());
}

TEST_CASE("A push log that cannot be opened is INVALID_ARGUMENT naming its path") {
  absl::StatusOr<std::unique_ptr<PushLog>> log = PushLog::Open("/nonexistent-dir/pushes.log");
  REQUIRE_FALSE(log.ok());
  CHECK(log.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(absl::StrContains(log.status().message(), "/nonexistent-dir/pushes.log"));
}

}  // namespace
}  // namespace convoy::agent
