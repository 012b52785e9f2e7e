// A test that cannot run here says so in CTest's terms instead of passing.
//
// CONVOY_SKIP(reason) warns with the reason and returns from the TEST_CASE. When every test case a
// test binary ran was skipped (CTest runs one test case per process), the binary exits with
// kSkipExitCode, which the CMake files give CTest as SKIP_RETURN_CODE: CTest reports "Skipped".
#ifndef CONVOY_TESTS_SKIP_H_
#define CONVOY_TESTS_SKIP_H_

#include <catch2/catch.hpp>

namespace convoy::testing {

inline constexpr int kSkipExitCode = 77;

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
