// Exactly-once pushes in the parameter server's core: repeats of a (push_session, sequence) are
// answered again and never applied twice; pushes computed on another incarnation's weights are
// refused.
#include <atomic>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "param_server/parameter_server.h"
#include "tests/catch.h"
#include "tests/support/subprocess.h"

namespace convoy {
namespace {

ParameterServerOptions SgdOptions() {
  ParameterServerOptions o;
  o.model = "tiny";
  o.optimizer.kind = Optimizer::kSgd;
  o.optimizer.momentum = 0;
  o.optimizer.learning_rate = 0.5;
  return o;
}

PushHeader Header(const ParameterServer& server, uint64_t session, uint64_t sequence) {
  PushHeader h;
  h.agent_id = "a";
  h.base_version = server.version();
  h.base_incarnation = server.incarnation();
  h.push_session = session;
  h.sequence = sequence;
  return h;
}

std::vector<float> Gradient(const ParameterServer& server, float value) {
  return std::vector<float>(server.model().parameter_count, value);
}

std::vector<float> Weights(const ParameterServer& server) {
  return server.Snapshot(v1::NETWORK_ONLINE)->values;
}

TEST_CASE("A repeated push is answered with its first answer and applied once", "[exactly_once]") {
  std::unique_ptr<ParameterServer> server = *ParameterServer::Create(SgdOptions());
  const PushHeader first = Header(*server, 7, 1);
  std::vector<float> g = Gradient(*server, 1.0f);
  const PushOutcome applied = server->Apply(first, g);
  REQUIRE(applied.accepted);
  CHECK_FALSE(applied.repeated);
  const std::vector<float> after_one = Weights(*server);

  std::vector<float> again = Gradient(*server, 1.0f);
  const PushOutcome repeat = server->Apply(first, again);  // The retry carries the same header.
  CHECK(repeat.accepted);
  CHECK(repeat.repeated);
  CHECK(repeat.version == applied.version);
  CHECK(server->version() == 1);
  CHECK(Weights(*server) == after_one);
  const v1::StatusResponse status = server->Status();
  CHECK(status.updates_applied() == 1);
  CHECK(status.repeated_pushes() == 1);

  // The next sequence applies; the older one, arriving late, is superseded and changes nothing.
  std::vector<float> g2 = Gradient(*server, 1.0f);
  REQUIRE(server->Apply(Header(*server, 7, 2), g2).accepted);
  const std::vector<float> after_two = Weights(*server);
  std::vector<float> late = Gradient(*server, 1.0f);
  const PushOutcome superseded = server->Apply(first, late);
  CHECK_FALSE(superseded.accepted);
  CHECK(superseded.repeated);
  CHECK(superseded.reason == v1::REJECT_REASON_SUPERSEDED);
  CHECK(server->version() == 2);
  CHECK(Weights(*server) == after_two);
  CHECK(server->Status().rejections().at("REJECT_REASON_SUPERSEDED") == 1);
}

TEST_CASE("A new push session numbers its pushes afresh", "[exactly_once]") {
  std::unique_ptr<ParameterServer> server = *ParameterServer::Create(SgdOptions());
  for (uint64_t seq = 1; seq <= 3; ++seq) {
    std::vector<float> g = Gradient(*server, 0.1f);
    REQUIRE(server->Apply(Header(*server, 11, seq), g).accepted);
  }
  // A restarted agent process: a new session, its sequence back at 1.
  std::vector<float> g = Gradient(*server, 0.1f);
  const PushOutcome restarted = server->Apply(Header(*server, 12, 1), g);
  CHECK(restarted.accepted);
  CHECK_FALSE(restarted.repeated);
  CHECK(server->version() == 4);
}

TEST_CASE("Join does not forget a push, so a retry across a rejoin still applies once",
          "[exactly_once]") {
  std::unique_ptr<ParameterServer> server = *ParameterServer::Create(SgdOptions());
  const PushHeader header = Header(*server, 5, 1);
  std::vector<float> g = Gradient(*server, 1.0f);
  REQUIRE(server->Apply(header, g).accepted);
  v1::JoinRequest join;
  join.set_agent_id("a");
  join.set_model_fingerprint(server->model().fingerprint);
  REQUIRE(server->Join(join).ok());
  std::vector<float> again = Gradient(*server, 1.0f);
  CHECK(server->Apply(header, again).repeated);
  CHECK(server->version() == 1);
}

TEST_CASE("A push computed on another incarnation's weights is refused and changes nothing",
          "[exactly_once]") {
  std::unique_ptr<ParameterServer> server = *ParameterServer::Create(SgdOptions());
  const std::vector<float> before = Weights(*server);
  PushHeader header = Header(*server, 3, 1);
  header.base_incarnation = server->incarnation() + 1;
  std::vector<float> g = Gradient(*server, 1.0f);
  const PushOutcome refused = server->Apply(header, g);
  CHECK_FALSE(refused.accepted);
  CHECK_FALSE(refused.repeated);
  CHECK(refused.reason == v1::REJECT_REASON_WRONG_INCARNATION);
  CHECK(server->version() == 0);
  CHECK(Weights(*server) == before);
  CHECK(server->Status().rejections().at("REJECT_REASON_WRONG_INCARNATION") == 1);
  // Its retry gets the same answer.
  std::vector<float> again = Gradient(*server, 1.0f);
  const PushOutcome repeat = server->Apply(header, again);
  CHECK(repeat.repeated);
  CHECK(repeat.reason == v1::REJECT_REASON_WRONG_INCARNATION);
  // The current incarnation, and an unknown one (0, an older client), apply.
  std::vector<float> g2 = Gradient(*server, 1.0f);
  CHECK(server->Apply(Header(*server, 3, 2), g2).accepted);
  PushHeader unknown = Header(*server, 3, 3);
  unknown.base_incarnation = 0;
  std::vector<float> g3 = Gradient(*server, 1.0f);
  CHECK(server->Apply(unknown, g3).accepted);
  CHECK(server->version() == 2);
}

TEST_CASE("An older client's pushes carry no sequence and each applies, as before",
          "[exactly_once]") {
  std::unique_ptr<ParameterServer> server = *ParameterServer::Create(SgdOptions());
  for (int i = 0; i < 2; ++i) {
    std::vector<float> g = Gradient(*server, 1.0f);
    CHECK(server->Apply("old", 0, 1, g).accepted);
  }
  CHECK(server->version() == 2);
  CHECK(server->Status().repeated_pushes() == 0);
}

TEST_CASE("Attempts of one push arriving together apply once", "[exactly_once][concurrency]") {
  std::unique_ptr<ParameterServer> server = *ParameterServer::Create(SgdOptions());
  const PushHeader header = Header(*server, 9, 1);
  constexpr int kAttempts = 8;
  std::atomic<int> accepted{0}, repeated{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kAttempts; ++i) {
    threads.emplace_back([&] {
      std::vector<float> g = Gradient(*server, 1.0f);
      const PushOutcome outcome = server->Apply(header, g);
      accepted += outcome.accepted ? 1 : 0;
      repeated += outcome.repeated ? 1 : 0;
    });
  }
  for (std::thread& t : threads) t.join();
  CHECK(accepted == kAttempts);  // Every attempt hears that the push was applied...
  CHECK(repeated == kAttempts - 1);
  CHECK(server->version() == 1);  // ...and it was, once.
  CHECK(server->Status().updates_applied() == 1);
}

TEST_CASE("The apply log names each start, each applied push as its version, and each checkpoint",
          "[exactly_once]") {
  const std::string dir = testing::MakeTempDir("apply_log");
  ParameterServerOptions o = SgdOptions();
  o.checkpoint_dir = dir + "/ckpt";
  o.apply_log = dir + "/apply.log";
  uint64_t first_incarnation = 0;
  {
    absl::StatusOr<std::unique_ptr<ParameterServer>> server = ParameterServer::Create(o);
    REQUIRE(server.ok());
    ParameterServer& ps = **server;
    first_incarnation = ps.incarnation();
    std::vector<float> g = Gradient(ps, 1.0f);
    REQUIRE(ps.Apply(Header(ps, 7, 1), g).accepted);
    g = Gradient(ps, 1.0f);
    REQUIRE(ps.Apply(Header(ps, 7, 1), g).repeated);  // A repeat: answered, not applied, not logged.
    REQUIRE(ps.Checkpoint().ok());
    g = Gradient(ps, 1.0f);
    PushHeader stale = Header(ps, 7, 2);
    stale.base_incarnation = ps.incarnation() + 1;  // Refused: not applied, not logged.
    REQUIRE(!ps.Apply(stale, g).accepted);
    g = Gradient(ps, 1.0f);
    REQUIRE(ps.Apply(Header(ps, 7, 3), g).accepted);
  }
  o.resume = true;
  absl::StatusOr<std::unique_ptr<ParameterServer>> resumed = ParameterServer::Create(o);
  REQUIRE(resumed.ok());
  const uint64_t a = first_incarnation, b = (*resumed)->incarnation();
  CHECK(testing::ReadWholeFile(o.apply_log) ==
        absl::StrCat("start incarnation=", a, " version=0\n",                                      //
                     "apply incarnation=", a, " version=1 agent=a session=7 sequence=1 minibatches=1 "
                     "staleness=0\n",                                                              //
                     "checkpoint incarnation=", a, " version=1\n",                                 //
                     "apply incarnation=", a, " version=2 agent=a session=7 sequence=3 minibatches=1 "
                     "staleness=0\n",                                                              //
                     "start incarnation=", b, " version=1\n"));
}

TEST_CASE("An apply log that cannot be opened stops the server at start, naming the path",
          "[exactly_once]") {
  ParameterServerOptions o = SgdOptions();
  o.apply_log = "/nonexistent-dir/apply.log";
  absl::StatusOr<std::unique_ptr<ParameterServer>> server = ParameterServer::Create(o);
  REQUIRE(!server.ok());
  CHECK_THAT(std::string(server.status().message()),
             Catch::Matchers::ContainsSubstring("/nonexistent-dir/apply.log"));
}

}  // namespace
}  // namespace convoy
