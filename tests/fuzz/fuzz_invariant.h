// The fuzz targets' invariant check: a broken invariant aborts, which libFuzzer saves as a crash.
#ifndef CONVOY_TESTS_FUZZ_FUZZ_INVARIANT_H_
#define CONVOY_TESTS_FUZZ_FUZZ_INVARIANT_H_

#include <cstdio>
#include <cstdlib>

namespace convoy {
namespace fuzz {

inline void Check(bool condition, const char* what) {
  if (condition) return;
  std::fprintf(stderr, "invariant violated: %s\n", what);
  std::abort();
}

}  // namespace fuzz
}  // namespace convoy

#endif  // CONVOY_TESTS_FUZZ_FUZZ_INVARIANT_H_
