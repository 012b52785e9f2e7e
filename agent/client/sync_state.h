// SyncState: where an agent stands with its parameter server (one server, or every shard of one as
// a single session). ParameterServerSync is the one place that moves it; docs/architecture.md draws
// the transitions.
#ifndef CONVOY_AGENT_CLIENT_SYNC_STATE_H_
#define CONVOY_AGENT_CLIENT_SYNC_STATE_H_

namespace convoy::agent {

enum class SyncState {
  // The learner holds the server's last pull plus what the next sync pushes; the server answers.
  kInStep,
  // The server answers, but the learner moved on without it (an answer overdue past sync_wait, or
  // training went on while an exchange was in flight): it learns locally, and a catch-up push of
  // what it learned is due.
  kOutOfStep,
  // The server (every shard) is away: the agent learns locally and tries to rejoin, paced.
  kAway,
  // A rejoin took (the push that got no answer was resent): the catch-up push comes next.
  kRejoined,
};

// "in step", "out of step", "away", "rejoined".
const char* SyncStateName(SyncState state);

}  // namespace convoy::agent

#endif  // CONVOY_AGENT_CLIENT_SYNC_STATE_H_
