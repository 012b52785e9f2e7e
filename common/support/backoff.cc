#include "common/support/backoff.h"

#include <algorithm>

namespace convoy {

Backoff::Backoff(const Options& options) : options_(options), current_(options.initial) {}

absl::Duration Backoff::NextDelay() {
  const absl::Duration base = current_;
  current_ = std::min(options_.max, current_ * options_.multiplier);
  ++attempts_;
  const double low = 1.0 - std::clamp(options_.jitter, 0.0, 1.0);
  return base * absl::Uniform(rng_, low, 1.0);
}

void Backoff::Reset() {
  current_ = options_.initial;
  attempts_ = 0;
}

}  // namespace convoy
