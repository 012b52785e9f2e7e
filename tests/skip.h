// A test that cannot run here says so in CTest's terms instead of passing.
//
// CONVOY_SKIP(reason) warns with the reason and returns from the TEST_CASE. When every test case a
// test binary ran was skipped (CTest runs one test case per process), the binary exits with
// kSkipExitCode, which convoy_catch_tests (tests/CMakeLists.txt) gives CTest as SKIP_RETURN_CODE:
// CTest reports "Skipped". The code is Catch2's own under v3 (4), 77 under v2; the build defines
// it.
#ifndef CONVOY_TESTS_SKIP_H_
#define CONVOY_TESTS_SKIP_H_

#include "tests/catch.h"

namespace convoy::testing {

inline constexpr int kSkipExitCode = CONVOY_SKIP_EXIT_CODE;

// Marks the running test case as skipped; test_main.cc counts them.
void MarkSkipped();

}  // namespace convoy::testing

#define CONVOY_SKIP(reason)           \
  do {                                \
    WARN("SKIP: " << reason);         \
    ::convoy::testing::MarkSkipped(); \
    return;                           \
  } while (false)

#endif  // CONVOY_TESTS_SKIP_H_
