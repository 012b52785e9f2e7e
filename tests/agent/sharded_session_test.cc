// ShardedSession over fake shards: a shard that is away is tried again beside the other shards'
// exchanges, never within them, and is paid what it missed when it is back.
#include "agent/sharded_session.h"

#include <memory>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "tests/agent/fake_session.h"
#include "tests/catch.h"

namespace convoy {
namespace {

using testing::FakeShard;

// Two shards of a four-value model: shard 0 serves [0, 2) at 1.0, shard 1 [2, 4) at 2.0.
struct TwoShards {
  TwoShards() {
    std::vector<std::unique_ptr<ServerSession>> shards;
    shards.emplace_back(shard0 = new FakeShard(0, 2, 1.0f));
    shards.emplace_back(shard1 = new FakeShard(2, 4, 2.0f));
    session = std::make_unique<ShardedSession>(std::move(shards), PushMode::kGradients);
    REQUIRE(session->Join(/*num_actions=*/4, JoinOptions()).ok());
    session->StartTraining();
    REQUIRE(session->Pull(&online, &target).ok());
  }

  FakeShard* shard0;
  FakeShard* shard1;
  std::unique_ptr<ShardedSession> session;
  std::vector<float> online, target;
};

const std::vector<float> kGradient = {0.1f, 0.2f, 0.3f, 0.4f};

// Pulls until shard 1 has answered a pull beyond `pulls` (its rejoin attempt ends on its own
// thread, and a pull takes it in once it has). The bound only keeps a broken session from hanging
// the test.
bool PullUntilShard1Pulled(TwoShards* s, int pulls) {
  for (int i = 0; i < 10000; ++i) {
    REQUIRE(s->session->Pull(&s->online, &s->target).ok());
    if (s->shard1->pulls() > pulls) return true;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return false;
}

TEST_CASE(
    "A shard away does not hold up the other shard's exchanges: its rejoin attempt runs beside "
    "them") {
  TwoShards s;
  CHECK(s.online == std::vector<float>{1.0f, 1.0f, 2.0f, 2.0f});
  s.shard1->SetServerAway(true);
  s.shard1->HoldRejoins(true);  // As a silent link holds an attempt until its connect timeout.
  REQUIRE(s.session->Push(kGradient, 1).ok());
  CHECK(s.session->connected());
  CHECK(s.session->has_pending_push());

  // Were the pulls to wait for shard 1's attempt, they would never return: it is held.
  REQUIRE(s.session->Pull(&s.online, &s.target).ok());
  s.shard1->AwaitRejoinsBegun(1);
  REQUIRE(s.session->Push(kGradient, 1).ok());
  REQUIRE(s.session->Pull(&s.online, &s.target).ok());
  CHECK(s.shard0->applied().size() == 2);
  CHECK(s.shard0->pulls() == 3);
  CHECK(s.shard1->rejoins() == 1);  // One attempt at a time.
  CHECK(s.online == std::vector<float>{1.0f, 1.0f, 2.0f, 2.0f});

  SECTION("back, it is paid the push it missed and its backlog, and pulled again") {
    const int pulls_before = s.shard1->pulls();
    s.shard1->SetServerAway(false);
    s.shard1->HoldRejoins(false);
    REQUIRE(PullUntilShard1Pulled(&s, pulls_before));
    const std::vector<FakeShard::Applied> applied = s.shard1->applied();
    REQUIRE(applied.size() == 2);
    CHECK(applied[0].values == std::vector<float>{0.3f, 0.4f});  // The push that got no answer.
    CHECK(applied[0].minibatches == 1);
    CHECK(applied[1].values == std::vector<float>{0.3f, 0.4f});  // The one made while away.
    CHECK(applied[1].minibatches == 1);
    CHECK_FALSE(s.session->has_pending_push());
    CHECK(s.online == std::vector<float>{1.0f, 1.0f, 2.0f, 2.0f});
  }
  SECTION("still away, a later pull starts its next attempt") {
    s.shard1->HoldRejoins(false);  // The attempt fails: the shard is still away.
    for (int i = 0; i < 10000 && s.shard1->rejoins() < 2; ++i) {
      REQUIRE(s.session->Pull(&s.online, &s.target).ok());
      absl::SleepFor(absl::Milliseconds(1));
    }
    CHECK(s.shard1->rejoins() >= 2);
    CHECK(s.session->has_pending_push());
  }
}

TEST_CASE("An away shard is not tried before its session's pacing says an attempt is due") {
  TwoShards s;
  s.shard1->SetServerAway(true);
  s.shard1->SetRejoinDue(false);
  REQUIRE(s.session->Push(kGradient, 1).ok());
  REQUIRE(s.session->Pull(&s.online, &s.target).ok());
  REQUIRE(s.session->Pull(&s.online, &s.target).ok());
  CHECK(s.shard1->rejoins() == 0);
  s.shard1->SetRejoinDue(true);
  REQUIRE(s.session->Pull(&s.online, &s.target).ok());
  s.shard1->AwaitRejoinsBegun(1);
}

TEST_CASE("With every shard away, Rejoin brings back the shards whose own attempt took") {
  TwoShards s;
  s.shard1->SetServerAway(true);
  s.shard1->HoldRejoins(true);
  REQUIRE(s.session->Push(kGradient, 1).ok());
  REQUIRE(s.session->Pull(&s.online, &s.target).ok());  // Starts shard 1's attempt, held.
  s.shard1->AwaitRejoinsBegun(1);
  s.shard0->SetServerAway(true);
  CHECK_FALSE(s.session->Push(kGradient, 1).ok());
  CHECK_FALSE(s.session->connected());

  s.shard0->SetServerAway(false);
  s.shard1->SetServerAway(false);
  s.shard1->HoldRejoins(false);
  // Shard 1's attempt in flight is waited for and taken, not made again; shard 0 rejoins now.
  REQUIRE(s.session->Rejoin(RejoinPace::kNow).ok());
  CHECK(s.shard1->rejoins() == 1);
  CHECK(s.shard0->rejoins() == 1);
  CHECK(s.shard1->rejoining());
  CHECK(s.shard0->rejoining());
  s.session->Reconnected();
  CHECK(s.session->connected());
  CHECK(s.shard0->connected());
  CHECK(s.shard1->connected());
  CHECK_FALSE(s.session->has_pending_push());
}

}  // namespace
}  // namespace convoy
