// The Catch2 main shared by every convoy test binary: glog to stderr, warnings and above only, and
// the skip exit code of skip.h.
#define CONVOY_CATCH_MAIN
#include <glog/logging.h>

#include "tests/catch.h"
#include "tests/skip.h"

namespace convoy::testing {
namespace {

// Catch runs test cases one after another on the main thread.
int test_cases_run = 0;
int test_cases_skipped = 0;
bool current_skipped = false;

struct SkipCounter : ListenerBase {
  using ListenerBase::ListenerBase;

  void testCaseStarting(const Catch::TestCaseInfo& info) override {
    ListenerBase::testCaseStarting(info);
    ++test_cases_run;
    current_skipped = false;
  }

  void testCaseEnded(const Catch::TestCaseStats& stats) override {
    if (current_skipped) ++test_cases_skipped;
    ListenerBase::testCaseEnded(stats);
  }
};
CATCH_REGISTER_LISTENER(SkipCounter)

}  // namespace

void MarkSkipped() { current_skipped = true; }

}  // namespace convoy::testing

int main(int argc, char** argv) {
  FLAGS_logtostderr = true;
  FLAGS_minloglevel = 1;
  google::InitGoogleLogging(argv[0]);
  using convoy::testing::kSkipExitCode;
  const int failed = Catch::Session().run(argc, argv);
  // Catch exits with the number of failed assertions; a count that reads as a skip still fails.
  if (failed != 0) return failed == kSkipExitCode ? kSkipExitCode + 1 : failed;
  const bool all_skipped = convoy::testing::test_cases_run > 0 &&
                           convoy::testing::test_cases_skipped == convoy::testing::test_cases_run;
  return all_skipped ? kSkipExitCode : 0;
}
