#include "common/support/backoff.h"

#include "tests/catch.h"

namespace convoy {
namespace {

TEST_CASE("Backoff grows geometrically to its cap, with jitter below each step", "[backoff]") {
  Backoff::Options options;
  options.initial = absl::Milliseconds(100);
  options.max = absl::Milliseconds(800);
  options.multiplier = 2;
  options.jitter = 0.5;
  Backoff backoff(options);
  const absl::Duration expected[] = {absl::Milliseconds(100), absl::Milliseconds(200),
                                     absl::Milliseconds(400), absl::Milliseconds(800),
                                     absl::Milliseconds(800)};
  for (absl::Duration step : expected) {
    const absl::Duration d = backoff.NextDelay();
    CHECK(d <= step);
    CHECK(d >= step / 2);
  }
  CHECK(backoff.attempts() == 5);
  backoff.Reset();
  CHECK(backoff.NextDelay() <= absl::Milliseconds(100));
}

TEST_CASE("Without jitter the delays are exact", "[backoff]") {
  Backoff::Options options;
  options.initial = absl::Milliseconds(10);
  options.jitter = 0;
  Backoff backoff(options);
  CHECK(backoff.NextDelay() == absl::Milliseconds(10));
  CHECK(backoff.NextDelay() == absl::Milliseconds(20));
}

}  // namespace
}  // namespace convoy
