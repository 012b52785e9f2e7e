// RejoinPacer: when the agent tries again to join a server it lost, as plain logic over given
// times.
#include "agent/client/rejoin_pacer.h"

#include <vector>

#include "tests/catch.h"

namespace convoy::agent {
namespace {

const absl::Time kLost = absl::UnixEpoch() + absl::Seconds(100);
const absl::Status kNoAnswer = absl::UnavailableError("connection refused");
const absl::Status kLateAnswer = absl::DeadlineExceededError("deadline exceeded");

RejoinPacer::Options Pacing() {
  RejoinPacer::Options options;
  options.after_no_answer = absl::Milliseconds(300);
  options.after_late_answer = absl::Seconds(3);
  return options;
}

TEST_CASE("The first rejoin attempt after the server is lost is due after the short interval") {
  RejoinPacer pacer(Pacing());
  pacer.Lost(kLost);
  CHECK_FALSE(pacer.Due(kLost));
  CHECK_FALSE(pacer.Due(kLost + absl::Milliseconds(299)));
  CHECK(pacer.Due(kLost + absl::Milliseconds(300)));
}

TEST_CASE("An attempt that got no answer is retried after the short interval") {
  RejoinPacer pacer(Pacing());
  pacer.Lost(kLost);
  const absl::Time failed = kLost + absl::Seconds(1);
  pacer.Attempted(failed, kNoAnswer);
  CHECK_FALSE(pacer.Due(failed + absl::Milliseconds(299)));
  CHECK(pacer.Due(failed + absl::Milliseconds(300)));
  // The session's own "the server took the Join but not the pushes" is no answer either.
  pacer.Attempted(failed, absl::UnavailableError("the server took the Join but not the pushes"));
  CHECK(pacer.next() == failed + absl::Milliseconds(300));
}

TEST_CASE("An attempt the server answered late, or refused, waits the long interval") {
  RejoinPacer pacer(Pacing());
  pacer.Lost(kLost);
  for (const absl::Status& answered :
       {kLateAnswer, absl::FailedPreconditionError("model mismatch")}) {
    const absl::Time failed = kLost + absl::Seconds(4);
    pacer.Attempted(failed, answered);
    CHECK_FALSE(pacer.Due(failed + absl::Milliseconds(2999)));
    CHECK(pacer.Due(failed + absl::Seconds(3)));
  }
}

TEST_CASE("A server that stays down gets at most one attempt per short interval") {
  RejoinPacer pacer(Pacing());
  pacer.Lost(kLost);
  // Every 10 ms for a minute, an attempt whenever one is due, each refused at once.
  int attempts = 0;
  for (absl::Time t = kLost; t < kLost + absl::Seconds(60); t += absl::Milliseconds(10)) {
    if (!pacer.Due(t)) continue;
    ++attempts;
    pacer.Attempted(t, kNoAnswer);
  }
  CHECK(attempts == 199);  // At 0.3 s, 0.6 s, ... 59.7 s.
}

TEST_CASE("A rejoin that took leaves nothing to wait for until the server is lost again") {
  RejoinPacer pacer(Pacing());
  pacer.Lost(kLost);
  pacer.Attempted(kLost + absl::Seconds(1), absl::OkStatus());
  CHECK(pacer.Due(kLost + absl::Seconds(1)));
  pacer.Lost(kLost + absl::Seconds(2));
  CHECK_FALSE(pacer.Due(kLost + absl::Seconds(2)));
}

}  // namespace
}  // namespace convoy::agent
