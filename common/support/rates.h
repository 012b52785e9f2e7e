// Running statistics over a trailing window: a moving average of the last N values and an event rate
// over the last stretch of time. Abseil only, so the parameter-server core and the agents share them.
#ifndef CONVOY_COMMON_SUPPORT_RATES_H_
#define CONVOY_COMMON_SUPPORT_RATES_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace convoy {

// The mean of the last `window` values added, such as the moving average return. Not thread-safe.
class MovingAverage {
 public:
  // window must be at least 1.
  explicit MovingAverage(size_t window);

  void Add(double value);
  // The mean of the values in the window; 0 before the first Add.
  double value() const;
  // How many values the mean is over: min(values added, window).
  size_t count() const { return values_.size(); }
  bool empty() const { return values_.empty(); }
  // The values in the window, oldest first: Add-ing them to a fresh average gives this one back.
  std::vector<double> values() const { return {values_.begin(), values_.end()}; }

 private:
  size_t window_;
  std::deque<double> values_;
};

// Events per second over a trailing window of time, such as env steps/s or train steps/s. Not
// thread-safe. Times passed in must not go backwards.
class RateMeter {
 public:
  // Counting starts at `start`: until a whole window has passed, the rate is over the time since
  // start.
  explicit RateMeter(absl::Duration window, absl::Time start = absl::Now());

  // Records `events` events happening at `now`.
  void Record(int64_t events, absl::Time now = absl::Now());
  // Events recorded in (now - window, now] divided by the window (or by the time since start, if
  // shorter); 0 when no time has passed.
  double PerSecond(absl::Time now = absl::Now());

 private:
  void Evict(absl::Time now);

  absl::Duration window_;
  absl::Time start_;
  std::deque<std::pair<absl::Time, int64_t>> events_;
  int64_t total_ = 0;
};

}  // namespace convoy

#endif  // CONVOY_COMMON_SUPPORT_RATES_H_
