// What the benchmark programs share: a set-up step that must succeed, and seconds since a start on
// the monotonic clock.
#ifndef CONVOY_BENCH_BENCH_SUPPORT_H_
#define CONVOY_BENCH_BENCH_SUPPORT_H_

#include <glog/logging.h>
#include <stdlib.h>

#include <chrono>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

// A benchmark has no way to carry on after a failed set-up step: log it and exit.
#define BENCH_CHECK_OK(expr)                                              \
  do {                                                                    \
    const absl::Status bench_status_ = (expr);                            \
    LOG_IF(FATAL, !bench_status_.ok()) << #expr << ": " << bench_status_; \
  } while (0)

namespace convoy::bench {

using BenchClock = std::chrono::steady_clock;

inline double Since(BenchClock::time_point start) {
  return std::chrono::duration<double>(BenchClock::now() - start).count();
}

// The directory a bench works in: `given` (its --dir), or where that is empty a fresh one,
// $TMPDIR/<prefix>-XXXXXX, which *made says the bench is to remove when it ends.
inline std::string BenchDirectory(const std::string& given, const std::string& prefix, bool* made) {
  *made = given.empty();
  if (!*made) return given;
  const char* base = std::getenv("TMPDIR");
  std::string pattern = absl::StrCat(base != nullptr ? base : "/tmp", "/", prefix, "-XXXXXX");
  LOG_IF(FATAL, ::mkdtemp(pattern.data()) == nullptr) << "cannot make a directory " << pattern;
  return pattern;
}

}  // namespace convoy::bench

#endif  // CONVOY_BENCH_BENCH_SUPPORT_H_
