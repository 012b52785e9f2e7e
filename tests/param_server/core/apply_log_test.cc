#include "param_server/core/apply_log.h"

#include <memory>
#include <string>

#include "tests/catch.h"
#include "tests/support/subprocess.h"

namespace convoy::ps {
namespace {

TEST_CASE("The apply log writes one line per typed record, in the format chaos_check.py reads",
          "[apply_log]") {
  const std::string path = testing::MakeTempDir("apply_log_unit") + "/apply.log";
  {
    absl::StatusOr<std::unique_ptr<ApplyLog>> log = ApplyLog::Open(path);
    REQUIRE(log.ok());
    (*log)->Started(11, 0);
    AppliedStep step;
    step.incarnation = 11;
    step.version = 1;
    step.pushes = {{"agent-0", 5, 2, 4, 3}};
    absl::Mutex mu;
    {
      absl::MutexLock lock(&mu);
      (*log)->Applied(mu, step);
    }
    (*log)->Checkpointed(11, 1);
  }
  CHECK(testing::ReadWholeFile(path) ==
        "start incarnation=11 version=0\n"
        "apply incarnation=11 version=1 agent=agent-0 session=5 sequence=2 minibatches=4 "
        "staleness=3\n"
        "checkpoint incarnation=11 version=1\n");
}

TEST_CASE(
    "A step that combined pushes writes one apply line each, of its version, in summation order",
    "[apply_log]") {
  const std::string path = testing::MakeTempDir("apply_log_unit") + "/apply.log";
  {
    absl::StatusOr<std::unique_ptr<ApplyLog>> log = ApplyLog::Open(path);
    REQUIRE(log.ok());
    AppliedStep step;
    step.incarnation = 11;
    step.version = 7;
    step.pushes = {{"b", 6, 1, 2, 0}, {"a", 5, 9, 4, 1}};
    absl::Mutex mu;
    absl::MutexLock lock(&mu);
    (*log)->Applied(mu, step);
  }
  CHECK(testing::ReadWholeFile(path) ==
        "apply incarnation=11 version=7 agent=b session=6 sequence=1 minibatches=2 staleness=0\n"
        "apply incarnation=11 version=7 agent=a session=5 sequence=9 minibatches=4 staleness=1\n");
}

TEST_CASE("A reopened apply log appends after the lines already there", "[apply_log]") {
  const std::string path = testing::MakeTempDir("apply_log_unit") + "/apply.log";
  for (uint64_t incarnation : {1, 2}) {
    absl::StatusOr<std::unique_ptr<ApplyLog>> log = ApplyLog::Open(path);
    REQUIRE(log.ok());
    (*log)->Started(incarnation, 0);
  }
  CHECK(testing::ReadWholeFile(path) ==
        "start incarnation=1 version=0\nstart incarnation=2 version=0\n");
}

TEST_CASE("A resumed start names the start that wrote its checkpoint", "[apply_log]") {
  const std::string path = testing::MakeTempDir("apply_log_unit") + "/apply.log";
  {
    absl::StatusOr<std::unique_ptr<ApplyLog>> log = ApplyLog::Open(path);
    REQUIRE(log.ok());
    (*log)->Started(12, 40, 11);
  }
  CHECK(testing::ReadWholeFile(path) == "start incarnation=12 version=40 resumed_from=11\n");
}

}  // namespace
}  // namespace convoy::ps
