#include "param_server/core/agent_registry.h"

#include "tests/catch.h"

namespace convoy::ps {
namespace {

absl::Time FixedClock() { return absl::FromUnixMillis(1000); }

PushAnswer Answer(bool accepted, uint64_t staleness) {
  PushAnswer outcome;
  outcome.accepted = accepted;
  outcome.staleness = staleness;
  return outcome;
}

TEST_CASE("A joined agent is listed with its host, and its index is what Seen returns",
          "[agent_registry]") {
  AgentRegistry registry(FixedClock);
  registry.Joined("a", "host-1", 3);
  CHECK(registry.Seen("a") == 3);
  v1::StatusResponse status;
  registry.AddTo(status);
  REQUIRE(status.agents_size() == 1);
  CHECK(status.agents(0).agent_id() == "a");
  CHECK(status.agents(0).hostname() == "host-1");
  CHECK(status.agents(0).last_seen_unix_ms() == 1000);
}

TEST_CASE("An agent that never joined has index 0 and is listed once seen", "[agent_registry]") {
  AgentRegistry registry(FixedClock);
  CHECK(registry.Seen("stranger") == 0);
  v1::StatusResponse status;
  registry.AddTo(status);
  REQUIRE(status.agents_size() == 1);
  CHECK(status.agents(0).hostname().empty());
}

TEST_CASE("Answers and refusals are counted per agent, with the last staleness",
          "[agent_registry]") {
  AgentRegistry registry(FixedClock);
  registry.Answered("a", Answer(true, 2));
  registry.Answered("a", Answer(false, 9));
  registry.Refused("a");
  registry.Answered("b", Answer(true, 1));
  v1::StatusResponse status;
  registry.AddTo(status);
  REQUIRE(status.agents_size() == 2);
  const v1::AgentStatus& a = status.agents(0);
  CHECK(a.pushes_accepted() == 1);
  CHECK(a.pushes_rejected() == 2);
  CHECK(a.last_staleness() == 9);
  CHECK(status.agents(1).agent_id() == "b");
  CHECK(status.agents(1).pushes_accepted() == 1);
}

}  // namespace
}  // namespace convoy::ps
