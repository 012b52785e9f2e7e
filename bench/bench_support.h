// What the benchmark programs share: a set-up step that must succeed, and seconds since a start on
// the monotonic clock.
#ifndef CONVOY_BENCH_BENCH_SUPPORT_H_
#define CONVOY_BENCH_BENCH_SUPPORT_H_

#include <glog/logging.h>

#include <chrono>

#include "absl/status/status.h"

// A benchmark has no way to carry on after a failed set-up step: log it and exit.
#define BENCH_CHECK_OK(expr)                                              \
  do {                                                                    \
    const absl::Status bench_status_ = (expr);                            \
    LOG_IF(FATAL, !bench_status_.ok()) << #expr << ": " << bench_status_; \
  } while (0)

namespace convoy {

using BenchClock = std::chrono::steady_clock;

inline double Since(BenchClock::time_point start) {
  return std::chrono::duration<double>(BenchClock::now() - start).count();
}

}  // namespace convoy

#endif  // CONVOY_BENCH_BENCH_SUPPORT_H_
