#include "common/support/rates.h"

#include <glog/logging.h>

#include <numeric>

namespace convoy {

MovingAverage::MovingAverage(size_t window) : window_(window) {
  CHECK_GE(window, 1u) << "MovingAverage needs a window of at least one value";
}

void MovingAverage::Add(double value) {
  values_.push_back(value);
  if (values_.size() > window_) values_.pop_front();
}

double MovingAverage::value() const {
  if (values_.empty()) return 0.0;
  // Summed afresh on each read: a running sum drifts over millions of adds and removals.
  return std::accumulate(values_.begin(), values_.end(), 0.0) / static_cast<double>(values_.size());
}

RateMeter::RateMeter(absl::Duration window, absl::Time start) : window_(window), start_(start) {
  CHECK_GT(window, absl::ZeroDuration()) << "RateMeter needs a positive window";
}

void RateMeter::Record(int64_t events, absl::Time now) {
  events_.emplace_back(now, events);
  total_ += events;
  Evict(now);
}

double RateMeter::PerSecond(absl::Time now) {
  Evict(now);
  const absl::Duration span = std::min(window_, now - start_);
  if (span <= absl::ZeroDuration()) return 0.0;
  return static_cast<double>(total_) / absl::ToDoubleSeconds(span);
}

void RateMeter::Evict(absl::Time now) {
  const absl::Time horizon = now - window_;
  while (!events_.empty() && events_.front().first <= horizon) {
    total_ -= events_.front().second;
    events_.pop_front();
  }
}

}  // namespace convoy
