// The agent's sync against fake servers, a fake model and a driven clock: every transition (in
// step, reply held, reply lost, servers away and back, one shard away, final sync) with no network
// and no wall clock. Each outage is driven with one server and with the two shards of a sharded
// one, through the same transitions: the sync owns them for one server and for N alike.
#include "agent/client/parameter_server_sync.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/agent/client/fake_transport.h"
#include "tests/catch.h"

namespace convoy::agent {
namespace {

using testing::FakeClock;
using testing::FakeModel;
using testing::FakeServer;
using testing::FakeServers;
using testing::kFakeEpsilon;

SyncOptions TwoMinibatchesPerSync() {
  SyncOptions options;
  options.agent_id = "agent-test";
  options.push = PushMode::kGradients;
  options.batch_update_frequency = 2;
  options.sync_wait = absl::Seconds(10);
  options.final_sync_for = absl::Seconds(30);
  // Rejoin attempts are due at once; their pacing has a test of its own below.
  options.rejoin.after_no_answer = absl::ZeroDuration();
  options.rejoin.after_late_answer = absl::ZeroDuration();
  return options;
}

const std::vector<float> kServerWeights = {9.0f, 9.0f};
const std::vector<float> kGradient = {1.0f, 2.0f};

// One server, or two shards of the two-value model: the sum of their versions, as Describe names
// it.
std::string DescribeAt(uint64_t version, size_t shards) {
  return shards == 1 ? absl::StrCat("PS v", version)
                     : absl::StrCat("PS v", version, " (summed over ", shards, " shards)");
}

struct Fixture {
  explicit Fixture(size_t shards, SyncOptions options = TwoMinibatchesPerSync())
      : servers(2, shards, 9.0f),
        model({0.0f, 0.0f}, kGradient),
        sync(servers.transports(), &model, options, kFakeEpsilon, &clock) {}
  FakeServers servers;
  FakeModel model;
  FakeClock clock;
  ParameterServerSync sync;
};

TEST_CASE("Servers that answer at the start leave the agent in step with their weights") {
  const size_t shards = GENERATE(1, 2);
  Fixture f(shards);
  CHECK(f.sync.state() == SyncState::kInStep);
  CHECK(f.sync.stats().in_step);
  CHECK(f.model.weights() == kServerWeights);
  CHECK(f.sync.Describe() == DescribeAt(shards, shards));  // Each server starts at version 1.
}

TEST_CASE("In step, each sync point pushes the mean gradient of its minibatches and pulls") {
  const size_t shards = GENERATE(1, 2);
  Fixture f(shards);
  f.sync.Trained();
  CHECK_FALSE(f.sync.TrainingWaits());  // Not a sync point yet: nothing in flight.
  f.sync.Trained();
  f.sync.AwaitExchange();
  const std::vector<FakeServers::Whole> applied = f.servers.applied();
  REQUIRE(applied.size() == 1);
  CHECK(applied[0].values == kGradient);  // Each server its range.
  CHECK(applied[0].minibatches == 2);
  CHECK(f.sync.state() == SyncState::kInStep);
  // Gradients in step: the servers' optimizers step, not the agent's.
  CHECK(f.model.local_steps() == 0);
  CHECK(f.sync.epsilon() == kFakeEpsilon / 2);
  CHECK(f.sync.version() == 2 * shards);
  CHECK(f.sync.stats().pushes == 1);
}

TEST_CASE(
    "A reply held past sync_wait puts the agent out of step, and a catch-up pushes what it "
    "learned") {
  const size_t shards = GENERATE(1, 2);
  Fixture f(shards);
  f.servers.HoldPushes(true);
  f.sync.Trained();
  f.sync.Trained();  // The sync point: its push is held.
  CHECK(f.sync.TrainingWaits());
  f.clock.Advance(absl::Seconds(9));
  CHECK(f.sync.TrainingWaits());
  f.clock.Advance(absl::Seconds(1));
  CHECK_FALSE(f.sync.TrainingWaits());
  CHECK(f.sync.state() == SyncState::kOutOfStep);
  CHECK_FALSE(f.sync.stats().in_step);
  CHECK(f.sync.Describe() == DescribeAt(shards, shards) + " (out of step)");

  f.sync.Trained();  // Learns locally while the answer is overdue.
  CHECK(f.model.local_steps() == 1);
  f.servers.HoldPushes(false);
  f.sync.AwaitExchange();
  // The answer came, but the model moved on without it: still out of step, and a catch-up is due.
  CHECK(f.sync.state() == SyncState::kOutOfStep);
  f.sync.Poll();
  f.sync.AwaitExchange();
  CHECK(f.sync.state() == SyncState::kInStep);
  const std::vector<FakeServers::Whole> applied = f.servers.applied();
  REQUIRE(applied.size() == 2);
  CHECK(applied[1].values == kGradient);
  CHECK(applied[1].minibatches == 1);
  CHECK(f.sync.stats().outage_pushes == 1);
}

TEST_CASE(
    "A reply lost keeps the push for the rejoin; the agent is away until the servers are back") {
  const size_t shards = GENERATE(1, 2);
  Fixture f(shards);
  f.servers.SetServersAway(true);
  f.sync.Trained();
  f.sync.Trained();
  f.sync.AwaitExchange();
  CHECK(f.sync.state() == SyncState::kAway);
  CHECK(f.sync.Describe() == DescribeAt(shards, shards) + " (disconnected)");

  SECTION("away, the agent learns locally and tries to rejoin at each sync point") {
    f.sync.Trained();
    CHECK(f.model.local_steps() == 1);
    f.sync.Trained();  // A sync point: a rejoin attempt on each server, which fails.
    f.sync.AwaitExchange();
    CHECK(f.servers.rejoins() == 1);
    CHECK(f.sync.state() == SyncState::kAway);
    CHECK_FALSE(f.sync.TrainingWaits());
  }
  SECTION(
      "back, a rejoin resends the lost push, then a catch-up pushes what was learned meanwhile") {
    f.sync.Trained();
    f.servers.SetServersAway(false);
    f.sync.Trained();
    f.sync.AwaitExchange();
    CHECK(f.sync.state() == SyncState::kRejoined);
    f.sync.Poll();
    f.sync.AwaitExchange();
    CHECK(f.sync.state() == SyncState::kInStep);
    const std::vector<FakeServers::Whole> applied = f.servers.applied();
    REQUIRE(applied.size() == 2);
    CHECK(applied[0].resent);
    CHECK(applied[0].minibatches == 2);
    CHECK(applied[1].minibatches == 2);  // The two minibatches learned locally, as one mean.
    CHECK(applied[1].values == kGradient);
    CHECK(f.model.weights() == kServerWeights);  // The catch-up took the servers' weights.
  }
}

TEST_CASE(
    "Away, each Poll past the poll interval starts a rejoin attempt, with no sync point needed, "
    "and each server's pacer decides whether it tries") {
  const size_t shards = GENERATE(1, 2);
  SyncOptions options = TwoMinibatchesPerSync();
  options.rejoin.after_no_answer = absl::Milliseconds(300);
  options.rejoin.after_late_answer = absl::Seconds(3);
  Fixture f(shards, options);
  f.servers.SetServersAway(true);
  f.sync.Trained();
  f.sync.Trained();
  f.sync.AwaitExchange();
  REQUIRE(f.sync.state() == SyncState::kAway);

  f.sync.Poll();  // Lost just now: the first attempt is due 300 ms later.
  f.sync.AwaitExchange();
  CHECK(f.servers.rejoins() == 0);
  f.clock.Advance(absl::Milliseconds(300));
  f.sync.Poll();  // No training since: still an attempt.
  f.sync.AwaitExchange();
  CHECK(f.servers.rejoins() == 1);
  f.clock.Advance(absl::Milliseconds(100));
  f.sync.Poll();  // Not due: the attempt got no answer 100 ms ago.
  f.sync.AwaitExchange();
  CHECK(f.servers.rejoins() == 1);
  f.clock.Advance(absl::Milliseconds(200));
  f.sync.Poll();
  f.sync.AwaitExchange();
  CHECK(f.servers.rejoins() == 2);

  f.servers.SetServersAway(false);
  f.clock.Advance(absl::Milliseconds(300));
  f.sync.Poll();  // Rejoins.
  f.sync.AwaitExchange();
  CHECK(f.sync.state() == SyncState::kRejoined);
  f.sync.Poll();  // The catch-up.
  f.sync.AwaitExchange();
  CHECK(f.sync.state() == SyncState::kInStep);
  CHECK(f.servers.applied().size() == 1);  // The push that got no answer; nothing learned since.
}

TEST_CASE("Servers away at the start leave the agent away, learning locally") {
  const size_t shards = GENERATE(1, 2);
  FakeServers servers(2, shards, 9.0f);
  servers.SetServersAway(true);
  FakeModel model({0.0f, 0.0f}, kGradient);
  FakeClock clock;
  ParameterServerSync sync(servers.transports(), &model, TwoMinibatchesPerSync(), kFakeEpsilon,
                           &clock);
  CHECK(sync.state() == SyncState::kAway);
  sync.Trained();
  CHECK(model.local_steps() == 1);
  CHECK(model.weights() == kGradient);
}

TEST_CASE(
    "One shard away keeps the agent in step: the other takes its range of each push, the away "
    "one's range goes into its backlog, and it is paid once back") {
  Fixture f(2);
  f.servers[1].SetServerAway(true);
  f.sync.Trained();
  f.sync.Trained();
  f.sync.AwaitExchange();  // Shard 1's push got no answer: it is away.
  CHECK(f.sync.state() == SyncState::kInStep);
  f.sync.Trained();
  f.sync.Trained();
  f.sync.AwaitExchange();  // Shard 0 takes its range; shard 1's goes into its backlog.
  CHECK(f.sync.state() == SyncState::kInStep);
  CHECK(f.model.local_steps() == 0);
  REQUIRE(f.servers[0].applied().size() == 2);
  CHECK(f.servers[1].applied().empty());

  SECTION("its rejoin attempt runs beside the other shard's exchanges, never within them") {
    f.servers[1].HoldRejoins(true);  // As a silent link holds an attempt until its timeout.
    f.sync.Poll();                   // Starts shard 1's attempt, which is held.
    f.servers[1].AwaitRejoinsBegun(1);
    f.sync.Trained();
    f.sync.Trained();
    // Were the exchange to wait for shard 1's attempt, it would never end: it is held.
    for (int i = 0; i < 10000 && f.servers[0].applied().size() < 3; ++i) {
      f.sync.WaitForAnswer();
    }
    CHECK(f.servers[0].applied().size() == 3);
    CHECK(f.servers[1].rejoins() == 1);  // One attempt at a time.
    f.servers[1].SetServerAway(false);
    f.servers[1].HoldRejoins(false);
    f.sync.AwaitExchange();  // Its attempt took: back.
    f.sync.Trained();
    f.sync.Trained();
    f.sync.AwaitExchange();  // The next exchange pays it.
    const std::vector<FakeServer::Applied> applied = f.servers[1].applied();
    REQUIRE(applied.size() == 2);
    CHECK(applied[0].resent);  // The push that got no answer.
    CHECK(applied[0].values == std::vector<float>{2.0f});
    // What it missed since (three sync points of 2 minibatches) and this push, as one mean.
    CHECK(applied[1].values == std::vector<float>{2.0f});
    CHECK(applied[1].minibatches == 6);
    CHECK(f.sync.state() == SyncState::kInStep);
  }
  SECTION("the final sync keeps trying, paced, until the shard is paid or final_sync_for ends") {
    const absl::Time start = f.clock.Now();
    f.sync.FinalSync();
    CHECK(f.clock.Now() == start + absl::Seconds(30));
    CHECK(f.sync.state() == SyncState::kInStep);
    CHECK(f.servers[1].applied().empty());
  }
  SECTION("the final sync pays it once it is back, and then has nothing left to do") {
    f.servers[1].SetServerAway(false);
    const absl::Time start = f.clock.Now();
    f.sync.FinalSync();
    CHECK(f.clock.Now() == start);
    REQUIRE(f.servers[1].applied().size() == 2);
    CHECK(f.servers[1].applied()[1].minibatches == 2);
  }
}

TEST_CASE(
    "A model that cannot learn alone is back in step after the catch-up, though it trains while "
    "the catch-up is in flight") {
  // The synthetic agent's loop: a minibatch trained at every turn, exchanges never waited for
  // before the next. Its weights do not move while it is away, so the catch-up's are current.
  const size_t shards = GENERATE(1, 2);
  FakeServers servers(2, shards, 9.0f);
  servers.SetServersAway(true);
  FakeModel model({0.0f, 0.0f}, kGradient);
  model.set_can_step(false);
  FakeClock clock;
  ParameterServerSync sync(servers.transports(), &model, TwoMinibatchesPerSync(), kFakeEpsilon,
                           &clock);
  REQUIRE(sync.state() == SyncState::kAway);
  servers.SetServersAway(false);
  sync.Poll();           // The rejoin attempts start,
  sync.AwaitExchange();  // and take.
  REQUIRE(sync.state() == SyncState::kRejoined);
  sync.Poll();     // The catch-up starts.
  sync.Trained();  // A minibatch while it is in flight.
  while (sync.TrainingWaits()) sync.WaitForAnswer();
  CHECK(sync.state() == SyncState::kInStep);
  CHECK(model.weights() == kServerWeights);
  sync.Trained();
  sync.Trained();
  sync.AwaitExchange();  // In step again: the next sync point pushes.
  CHECK(sync.state() == SyncState::kInStep);
  REQUIRE(servers.applied().size() == 1);
  CHECK(servers.applied()[0].minibatches == 2);
}

TEST_CASE("The final sync pushes the minibatches learned since the last sync point") {
  const size_t shards = GENERATE(1, 2);
  Fixture f(shards);
  f.sync.Trained();
  const absl::Time start = f.clock.Now();
  f.sync.FinalSync();
  CHECK(f.clock.Now() == start);
  const std::vector<FakeServers::Whole> applied = f.servers.applied();
  REQUIRE(applied.size() == 1);
  CHECK(applied[0].minibatches == 1);
  CHECK(f.sync.state() == SyncState::kInStep);
}

TEST_CASE("The final sync with the servers away tries to rejoin each second until final_sync_for") {
  const size_t shards = GENERATE(1, 2);
  Fixture f(shards);
  f.servers.SetServersAway(true);
  f.sync.Trained();
  const absl::Time start = f.clock.Now();
  f.sync.FinalSync();
  CHECK(f.clock.Now() == start + absl::Seconds(30));
  CHECK(f.sync.state() == SyncState::kAway);
  // The push at once gets no answer; then one rejoin a second for the rest of final_sync_for.
  CHECK(f.servers.rejoins() == 29);
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
    "The final sync with nothing listening at the servers' addresses ends once the refusal "
    "has lasted kGoneAfterRefusedFor") {
  const size_t shards = GENERATE(1, 2);
  SyncOptions options = TwoMinibatchesPerSync();
  auto presence = std::make_shared<FakePresence>(ServerAbsence::kNothingListens);
  options.presence = presence;
  Fixture f(shards, options);
  f.servers.SetServersAway(true);
  f.sync.Trained();
  const absl::Time start = f.clock.Now();
  f.sync.FinalSync();
  // Refused at the start, and after the push that got no answer; a second later, one rejoin on,
  // still refused.
  CHECK(f.clock.Now() == start + ParameterServerSync::kGoneAfterRefusedFor);
  CHECK(presence->checks() == 3);
  CHECK(f.servers.rejoins() == 1);
  CHECK(f.sync.state() == SyncState::kAway);
}

TEST_CASE("The final sync of an agent whose launcher died ends before any attempt") {
  const size_t shards = GENERATE(1, 2);
  SyncOptions options = TwoMinibatchesPerSync();
  options.presence = std::make_shared<FakePresence>(ServerAbsence::kLauncherDied);
  Fixture f(shards, options);
  f.servers.SetServersAway(true);
  f.sync.Trained();
  const absl::Time start = f.clock.Now();
  f.sync.FinalSync();
  CHECK(f.clock.Now() == start);
  CHECK(f.servers.applied().empty());
  CHECK(f.servers.rejoins() == 0);
}

TEST_CASE(
    "The final sync without evidence that the servers are gone tries for all of "
    "final_sync_for") {
  const size_t shards = GENERATE(1, 2);
  SyncOptions options = TwoMinibatchesPerSync();
  auto presence = std::make_shared<FakePresence>(ServerAbsence::kNoEvidence);
  options.presence = presence;
  Fixture f(shards, options);
  f.servers.SetServersAway(true);
  f.sync.Trained();
  const absl::Time start = f.clock.Now();
  f.sync.FinalSync();
  CHECK(f.clock.Now() == start + absl::Seconds(30));
  CHECK(f.servers.rejoins() == 29);
  CHECK(presence->checks() == 31);  // Asked at the start and after each attempt.
}

TEST_CASE("The final sync pushes to servers that answer, whatever a refusal at the start said") {
  const size_t shards = GENERATE(1, 2);
  SyncOptions options = TwoMinibatchesPerSync();
  auto presence = std::make_shared<FakePresence>(ServerAbsence::kNothingListens);
  options.presence = presence;
  Fixture f(shards, options);
  f.sync.Trained();
  f.sync.FinalSync();
  CHECK(presence->checks() == 1);  // At the start only: the push was answered.
  REQUIRE(f.servers.applied().size() == 1);
  CHECK(f.servers.applied()[0].minibatches == 1);
  CHECK(f.sync.state() == SyncState::kInStep);
}

TEST_CASE("The final sync with servers that come back rejoins, catches up and ends in step") {
  const size_t shards = GENERATE(1, 2);
  Fixture f(shards);
  f.servers.SetServersAway(true);
  f.sync.Trained();
  f.sync.Trained();
  f.sync.AwaitExchange();
  REQUIRE(f.sync.state() == SyncState::kAway);
  f.sync.Trained();
  f.servers.SetServersAway(false);
  f.sync.FinalSync();
  CHECK(f.sync.state() == SyncState::kInStep);
  const std::vector<FakeServers::Whole> applied = f.servers.applied();
  REQUIRE(applied.size() == 2);
  CHECK(applied[0].resent);
  CHECK(applied[1].minibatches == 1);
}

TEST_CASE("Deltas push the weight change since the last sync, stepping locally every minibatch") {
  const size_t shards = GENERATE(1, 2);
  SyncOptions options = TwoMinibatchesPerSync();
  options.push = PushMode::kDeltas;
  Fixture f(shards, options);
  f.sync.Trained();
  f.sync.Trained();
  f.sync.AwaitExchange();
  CHECK(f.model.local_steps() == 2);
  const std::vector<FakeServers::Whole> applied = f.servers.applied();
  REQUIRE(applied.size() == 1);
  CHECK(applied[0].values == std::vector<float>{2.0f, 4.0f});
  CHECK(f.sync.state() == SyncState::kInStep);
}

TEST_CASE("Every sync state has a name") {
  CHECK(std::string(SyncStateName(SyncState::kInStep)) == "in step");
  CHECK(std::string(SyncStateName(SyncState::kOutOfStep)) == "out of step");
  CHECK(std::string(SyncStateName(SyncState::kAway)) == "away");
  CHECK(std::string(SyncStateName(SyncState::kRejoined)) == "rejoined");
}

}  // namespace
}  // namespace convoy::agent
