// The agent's sync state machine against a fake session, a fake model and a driven clock: every
// transition (in step, reply held, reply lost, server away and back, one shard away, final sync)
// with no server and no wall clock.
#include "agent/parameter_server_sync.h"

#include <memory>
#include <vector>

#include "tests/agent/fake_session.h"
#include "tests/catch.h"

namespace convoy {
namespace {

using testing::FakeClock;
using testing::FakeModel;
using testing::FakeSession;

SyncOptions TwoMinibatchesPerSync() {
  SyncOptions options;
  options.agent_id = "agent-test";
  options.push = PushMode::kGradients;
  options.batch_update_frequency = 2;
  options.sync_wait = absl::Seconds(10);
  options.final_sync_for = absl::Seconds(30);
  return options;
}

const std::vector<float> kServerWeights = {9.0f, 9.0f};
const std::vector<float> kGradient = {1.0f, 2.0f};

TEST_CASE(
    "A session that answers at the start leaves the agent in step with the server's weights") {
  FakeSession session(kServerWeights);
  FakeModel model({0.0f, 0.0f}, kGradient);
  FakeClock clock;
  ParameterServerSync sync(&session, &model, TwoMinibatchesPerSync(), FakeSession::kEpsilon,
                           &clock);
  CHECK(sync.state() == SyncState::kInStep);
  CHECK(sync.stats().in_step);
  CHECK(model.weights() == kServerWeights);
  CHECK(sync.Describe() == "PS v1");
}

TEST_CASE("In step, each sync point pushes the mean gradient of its minibatches and pulls") {
  FakeSession session(kServerWeights);
  FakeModel model({0.0f, 0.0f}, kGradient);
  FakeClock clock;
  ParameterServerSync sync(&session, &model, TwoMinibatchesPerSync(), FakeSession::kEpsilon,
                           &clock);
  sync.Trained();
  CHECK_FALSE(sync.TrainingWaits());  // Not a sync point yet: nothing in flight.
  sync.Trained();
  sync.AwaitExchange();
  const std::vector<FakeSession::Applied> applied = session.applied();
  REQUIRE(applied.size() == 1);
  CHECK(applied[0].values == kGradient);
  CHECK(applied[0].minibatches == 2);
  CHECK(sync.state() == SyncState::kInStep);
  CHECK(model.local_steps() ==
        0);  // Gradients in step: the server's optimizer steps, not the agent's.
  CHECK(sync.epsilon() == FakeSession::kEpsilon / 2);
  CHECK(sync.version() == 2);
  CHECK(sync.stats().pushes == 1);
}

TEST_CASE(
    "A reply held past sync_wait puts the agent out of step, and a catch-up pushes what it "
    "learned") {
  FakeSession session(kServerWeights);
  FakeModel model({0.0f, 0.0f}, kGradient);
  FakeClock clock;
  ParameterServerSync sync(&session, &model, TwoMinibatchesPerSync(), FakeSession::kEpsilon,
                           &clock);
  session.HoldPushes(true);
  sync.Trained();
  sync.Trained();  // The sync point: its push is held.
  CHECK(sync.TrainingWaits());
  clock.Advance(absl::Seconds(9));
  CHECK(sync.TrainingWaits());
  clock.Advance(absl::Seconds(1));
  CHECK_FALSE(sync.TrainingWaits());
  CHECK(sync.state() == SyncState::kOutOfStep);
  CHECK_FALSE(sync.stats().in_step);
  CHECK(sync.Describe() == "PS v1 (out of step)");

  sync.Trained();  // Learns locally while the answer is overdue.
  CHECK(model.local_steps() == 1);
  session.HoldPushes(false);
  sync.AwaitExchange();
  // The answer came, but the model moved on without it: still out of step, and a catch-up is due.
  CHECK(sync.state() == SyncState::kOutOfStep);
  sync.Poll();
  sync.AwaitExchange();
  CHECK(sync.state() == SyncState::kInStep);
  const std::vector<FakeSession::Applied> applied = session.applied();
  REQUIRE(applied.size() == 2);
  CHECK(applied[1].values == kGradient);
  CHECK(applied[1].minibatches == 1);
  CHECK(sync.stats().outage_pushes == 1);
}

TEST_CASE(
    "A reply lost keeps the push for the rejoin; the agent is away until the server is back") {
  FakeSession session(kServerWeights);
  FakeModel model({0.0f, 0.0f}, kGradient);
  FakeClock clock;
  ParameterServerSync sync(&session, &model, TwoMinibatchesPerSync(), FakeSession::kEpsilon,
                           &clock);
  session.SetServerAway(true);
  sync.Trained();
  sync.Trained();
  sync.AwaitExchange();
  CHECK(sync.state() == SyncState::kAway);
  CHECK(sync.Describe() == "PS v1 (disconnected)");

  SECTION("away, the agent learns locally and tries to rejoin at each sync point") {
    sync.Trained();
    CHECK(model.local_steps() == 1);
    sync.Trained();  // A sync point: a rejoin attempt, which fails.
    sync.AwaitExchange();
    CHECK(session.rejoins() == 1);
    CHECK(sync.state() == SyncState::kAway);
    sync.Poll();  // Away: no catch-up to start.
    CHECK_FALSE(sync.TrainingWaits());
  }
  SECTION(
      "back, a rejoin resends the lost push, then a catch-up pushes what was learned meanwhile") {
    sync.Trained();
    session.SetServerAway(false);
    sync.Trained();
    sync.AwaitExchange();
    CHECK(sync.state() == SyncState::kRejoined);
    sync.Poll();
    sync.AwaitExchange();
    CHECK(sync.state() == SyncState::kInStep);
    const std::vector<FakeSession::Applied> applied = session.applied();
    REQUIRE(applied.size() == 2);
    CHECK(applied[0].resent);
    CHECK(applied[0].minibatches == 2);
    CHECK(applied[1].minibatches == 2);  // The two minibatches learned locally, as one mean.
    CHECK(applied[1].values == kGradient);
    CHECK(model.weights() == kServerWeights);  // The catch-up took the server's weights.
  }
}

TEST_CASE(
    "Away, each Poll past the poll interval starts a rejoin attempt, with no sync point needed, "
    "and "
    "the session's pacing decides whether it tries") {
  FakeSession session(kServerWeights);
  FakeModel model({0.0f, 0.0f}, kGradient);
  FakeClock clock;
  ParameterServerSync sync(&session, &model, TwoMinibatchesPerSync(), FakeSession::kEpsilon,
                           &clock);
  session.SetServerAway(true);
  sync.Trained();
  sync.Trained();
  sync.AwaitExchange();
  REQUIRE(sync.state() == SyncState::kAway);

  sync.Poll();  // No training since: still an attempt.
  sync.AwaitExchange();
  CHECK(session.rejoins() == 1);
  sync.Poll();  // Within the poll interval: none.
  sync.AwaitExchange();
  CHECK(session.rejoins() == 1);
  clock.Advance(absl::Milliseconds(100));
  sync.Poll();
  sync.AwaitExchange();
  CHECK(session.rejoins() == 2);

  session.SetServerAway(false);
  clock.Advance(absl::Milliseconds(100));
  sync.Poll();  // Rejoins.
  sync.AwaitExchange();
  CHECK(sync.state() == SyncState::kRejoined);
  sync.Poll();  // The catch-up.
  sync.AwaitExchange();
  CHECK(sync.state() == SyncState::kInStep);
  CHECK(session.applied().size() == 1);  // The push that got no answer; nothing learned since.
}

TEST_CASE("A server away at the start leaves the agent away, learning locally") {
  FakeSession session(kServerWeights);
  session.SetServerAway(true);
  FakeModel model({0.0f, 0.0f}, kGradient);
  FakeClock clock;
  ParameterServerSync sync(&session, &model, TwoMinibatchesPerSync(), FakeSession::kEpsilon,
                           &clock);
  CHECK(sync.state() == SyncState::kAway);
  sync.Trained();
  CHECK(model.local_steps() == 1);
  CHECK(model.weights() == kGradient);
}

TEST_CASE("One shard away keeps the agent in step while the session owes it a backlog") {
  FakeSession session(kServerWeights);
  FakeModel model({0.0f, 0.0f}, kGradient);
  FakeClock clock;
  ParameterServerSync sync(&session, &model, TwoMinibatchesPerSync(), FakeSession::kEpsilon,
                           &clock);
  session.SetOwes(true);
  sync.Trained();
  sync.Trained();
  sync.AwaitExchange();
  CHECK(sync.state() == SyncState::kInStep);
  CHECK(model.local_steps() == 0);

  SECTION(
      "the final sync keeps exchanging, paced, until the shard is paid or final_sync_for ends") {
    const absl::Time start = clock.Now();
    sync.FinalSync();
    CHECK(clock.Now() == start + absl::Seconds(30));
    CHECK(sync.state() == SyncState::kInStep);
  }
  SECTION("once the shard is paid, the final sync has nothing left to do") {
    session.SetOwes(false);
    const absl::Time start = clock.Now();
    sync.FinalSync();
    CHECK(clock.Now() == start);
    CHECK(session.applied().size() == 1);
  }
}

TEST_CASE("The final sync pushes the minibatches learned since the last sync point") {
  FakeSession session(kServerWeights);
  FakeModel model({0.0f, 0.0f}, kGradient);
  FakeClock clock;
  ParameterServerSync sync(&session, &model, TwoMinibatchesPerSync(), FakeSession::kEpsilon,
                           &clock);
  sync.Trained();
  const absl::Time start = clock.Now();
  sync.FinalSync();
  CHECK(clock.Now() == start);
  const std::vector<FakeSession::Applied> applied = session.applied();
  REQUIRE(applied.size() == 1);
  CHECK(applied[0].minibatches == 1);
  CHECK(sync.state() == SyncState::kInStep);
}

TEST_CASE("The final sync with the server away tries to rejoin each second until final_sync_for") {
  FakeSession session(kServerWeights);
  FakeModel model({0.0f, 0.0f}, kGradient);
  FakeClock clock;
  ParameterServerSync sync(&session, &model, TwoMinibatchesPerSync(), FakeSession::kEpsilon,
                           &clock);
  session.SetServerAway(true);
  sync.Trained();
  const absl::Time start = clock.Now();
  sync.FinalSync();
  CHECK(clock.Now() == start + absl::Seconds(30));
  CHECK(sync.state() == SyncState::kAway);
  // The push at once gets no answer; then one rejoin a second for the rest of final_sync_for.
  CHECK(session.rejoins() == 29);
}

// Says what the test sets, and counts how often it was asked.
class FakePresence : public ServerPresence {
 public:
  explicit FakePresence(ServerAbsence absence) : absence_(absence) {}
  ServerAbsence Check() override {
    ++checks_;
    return absence_;
  }
  int checks() const { return checks_; }

 private:
  const ServerAbsence absence_;
  int checks_ = 0;
};

TEST_CASE(
    "The final sync with nothing listening at the server's address ends once the refusal "
    "has lasted kGoneAfterRefusedFor") {
  FakeSession session(kServerWeights);
  FakeModel model({0.0f, 0.0f}, kGradient);
  FakeClock clock;
  SyncOptions options = TwoMinibatchesPerSync();
  auto presence = std::make_shared<FakePresence>(ServerAbsence::kNothingListens);
  options.presence = presence;
  ParameterServerSync sync(&session, &model, options, FakeSession::kEpsilon, &clock);
  session.SetServerAway(true);
  sync.Trained();
  const absl::Time start = clock.Now();
  sync.FinalSync();
  // Refused at the start, and after the push that got no answer; a second later, one rejoin on,
  // still refused.
  CHECK(clock.Now() == start + ParameterServerSync::kGoneAfterRefusedFor);
  CHECK(presence->checks() == 3);
  CHECK(session.rejoins() == 1);
  CHECK(sync.state() == SyncState::kAway);
}

TEST_CASE("The final sync of an agent whose launcher died ends before any attempt") {
  FakeSession session(kServerWeights);
  FakeModel model({0.0f, 0.0f}, kGradient);
  FakeClock clock;
  SyncOptions options = TwoMinibatchesPerSync();
  options.presence = std::make_shared<FakePresence>(ServerAbsence::kLauncherDied);
  ParameterServerSync sync(&session, &model, options, FakeSession::kEpsilon, &clock);
  session.SetServerAway(true);
  sync.Trained();
  const absl::Time start = clock.Now();
  sync.FinalSync();
  CHECK(clock.Now() == start);
  CHECK(session.applied().empty());
  CHECK(session.rejoins() == 0);
}

TEST_CASE(
    "The final sync without evidence that the server is gone tries for all of "
    "final_sync_for") {
  FakeSession session(kServerWeights);
  FakeModel model({0.0f, 0.0f}, kGradient);
  FakeClock clock;
  SyncOptions options = TwoMinibatchesPerSync();
  auto presence = std::make_shared<FakePresence>(ServerAbsence::kNoEvidence);
  options.presence = presence;
  ParameterServerSync sync(&session, &model, options, FakeSession::kEpsilon, &clock);
  session.SetServerAway(true);
  sync.Trained();
  const absl::Time start = clock.Now();
  sync.FinalSync();
  CHECK(clock.Now() == start + absl::Seconds(30));
  CHECK(session.rejoins() == 29);
  CHECK(presence->checks() == 31);  // Asked at the start and after each attempt.
}

TEST_CASE("The final sync pushes to a server that answers, whatever a refusal at the start said") {
  FakeSession session(kServerWeights);
  FakeModel model({0.0f, 0.0f}, kGradient);
  FakeClock clock;
  SyncOptions options = TwoMinibatchesPerSync();
  auto presence = std::make_shared<FakePresence>(ServerAbsence::kNothingListens);
  options.presence = presence;
  ParameterServerSync sync(&session, &model, options, FakeSession::kEpsilon, &clock);
  sync.Trained();
  sync.FinalSync();
  CHECK(presence->checks() == 1);  // At the start only: the push was answered.
  REQUIRE(session.applied().size() == 1);
  CHECK(session.applied()[0].minibatches == 1);
  CHECK(sync.state() == SyncState::kInStep);
}

TEST_CASE("The final sync with a server that comes back rejoins, catches up and ends in step") {
  FakeSession session(kServerWeights);
  FakeModel model({0.0f, 0.0f}, kGradient);
  FakeClock clock;
  ParameterServerSync sync(&session, &model, TwoMinibatchesPerSync(), FakeSession::kEpsilon,
                           &clock);
  session.SetServerAway(true);
  sync.Trained();
  sync.Trained();
  sync.AwaitExchange();
  REQUIRE(sync.state() == SyncState::kAway);
  sync.Trained();
  session.SetServerAway(false);
  sync.FinalSync();
  CHECK(sync.state() == SyncState::kInStep);
  const std::vector<FakeSession::Applied> applied = session.applied();
  REQUIRE(applied.size() == 2);
  CHECK(applied[0].resent);
  CHECK(applied[1].minibatches == 1);
}

TEST_CASE("Deltas push the weight change since the last sync, stepping locally every minibatch") {
  FakeSession session(kServerWeights);
  FakeModel model({0.0f, 0.0f}, kGradient);
  FakeClock clock;
  SyncOptions options = TwoMinibatchesPerSync();
  options.push = PushMode::kDeltas;
  ParameterServerSync sync(&session, &model, options, FakeSession::kEpsilon, &clock);
  sync.Trained();
  sync.Trained();
  sync.AwaitExchange();
  CHECK(model.local_steps() == 2);
  const std::vector<FakeSession::Applied> applied = session.applied();
  REQUIRE(applied.size() == 1);
  CHECK(applied[0].values == std::vector<float>{2.0f, 4.0f});
  CHECK(sync.state() == SyncState::kInStep);
}

TEST_CASE("A sharded server's version is shown as the sum over its shards that it is") {
  FakeSession session(kServerWeights);
  session.SetShards(2);
  FakeModel model({0.0f, 0.0f}, kGradient);
  FakeClock clock;
  ParameterServerSync sync(&session, &model, TwoMinibatchesPerSync(), FakeSession::kEpsilon,
                           &clock);
  CHECK(sync.Describe() == "PS v1 (summed over 2 shards)");
}

TEST_CASE("Every sync state has a name") {
  CHECK(std::string(SyncStateName(SyncState::kInStep)) == "in step");
  CHECK(std::string(SyncStateName(SyncState::kOutOfStep)) == "out of step");
  CHECK(std::string(SyncStateName(SyncState::kAway)) == "away");
  CHECK(std::string(SyncStateName(SyncState::kRejoined)) == "rejoined");
}

}  // namespace
}  // namespace convoy
