// RejoinPacer: when the agent tries again to join a parameter server it lost. An attempt that
// failed without an answer from the server (refused, unreachable, no connection within the connect
// timeout, or the connection lost) is retried after `after_no_answer`: such a failure costs the
// server nothing, and the link may be back any moment. An attempt that reached the server but was
// answered late or refused (a busy server) waits `after_late_answer`. A server that is down thus
// gets at most 1 / after_no_answer attempts a second from each agent. Time is passed in, so that
// the pacing is plain logic.
#ifndef CONVOY_AGENT_CLIENT_REJOIN_PACER_H_
#define CONVOY_AGENT_CLIENT_REJOIN_PACER_H_

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace convoy::agent {

// When a rejoin attempt may start.
enum class RejoinPace {
  kPaced,  // When the server's pacer says one is due.
  kNow,    // At once (the last sync of a run).
};

class RejoinPacer {
 public:
  struct Options {
    absl::Duration after_no_answer = absl::Milliseconds(300);
    absl::Duration after_late_answer = absl::Seconds(3);
  };
  explicit RejoinPacer(const Options& options) : options_(options) {}

  // The server was lost at `now`: the first attempt is due after_no_answer later.
  void Lost(absl::Time now) { next_ = now + options_.after_no_answer; }
  // A paced attempt may start at `now`.
  bool Due(absl::Time now) const { return now >= next_; }
  // An attempt that ended at `now` with `outcome` (OK: rejoined, nothing is due until the next
  // loss).
  void Attempted(absl::Time now, const absl::Status& outcome) {
    if (outcome.ok()) {
      next_ = absl::InfinitePast();
      return;
    }
    // UNAVAILABLE: no answer came from the server (PsClient's connect failures and lost connections
    // are UNAVAILABLE). Anything else is an answer: late (DEADLINE_EXCEEDED) or a refusal.
    next_ = now + (outcome.code() == absl::StatusCode::kUnavailable ? options_.after_no_answer
                                                                    : options_.after_late_answer);
  }
  absl::Time next() const { return next_; }

 private:
  const Options options_;
  absl::Time next_ = absl::InfinitePast();
};

}  // namespace convoy::agent

#endif  // CONVOY_AGENT_CLIENT_REJOIN_PACER_H_
