// Exponential backoff with full jitter, for reconnecting to a parameter server or simulator.
#ifndef CONVOY_COMMON_SUPPORT_BACKOFF_H_
#define CONVOY_COMMON_SUPPORT_BACKOFF_H_

#include <cstdint>

#include "absl/random/random.h"
#include "absl/time/time.h"

namespace convoy {

// Not thread-safe: one Backoff per retry loop.
class Backoff {
 public:
  struct Options {
    absl::Duration initial = absl::Milliseconds(100);
    absl::Duration max = absl::Seconds(5);
    double multiplier = 2.0;
    // Each delay is drawn uniformly from [(1 - jitter) * d, d], so many clients restarting together spread out.
    double jitter = 0.5;
  };

  Backoff() : Backoff(Options{}) {}
  explicit Backoff(const Options& options);

  // The delay before the next attempt; grows geometrically up to options.max.
  absl::Duration NextDelay();

  // Back to the initial delay, after a success.
  void Reset();

  int attempts() const { return attempts_; }

 private:
  Options options_;
  absl::Duration current_;
  int attempts_ = 0;
  absl::BitGen rng_;
};

}  // namespace convoy

#endif  // CONVOY_COMMON_SUPPORT_BACKOFF_H_
