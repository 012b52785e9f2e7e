// The agent's transport to a parameter server against a real in-process one over loopback gRPC:
// joining and adopting the run settings, pushes and pulls, and rejoining (the push that got no
// answer sent again) after the server was away or started afresh.
#include "agent/client/ps_transport.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/agent.h"
#include "agent/client/sync_observer.h"
#include "tests/catch.h"
#include "tests/param_server/service/loopback_server.h"
#include "tests/support/subprocess.h"

namespace convoy::agent {
namespace {

using testing::LoopbackServer;

ps::ParameterServerOptions CompactServer() {
  ps::ParameterServerOptions o;
  o.model = "compact";
  return o;
}

AgentOptions Agent(const LoopbackServer& ps) {
  AgentOptions o;
  o.agent_id = "session-test";
  o.ps_address = ps.address;
  return o;
}

// Quick to give up on a server that is away, so the outage tests run in seconds.
PsTransportOptions QuickOptions(const AgentOptions& agent) {
  PsTransportOptions o;
  o.address = agent.ps_address;
  o.agent_id = agent.agent_id;
  o.join_for = absl::Seconds(10);
  o.retry_while_training = absl::Milliseconds(500);
  return o;
}

std::unique_ptr<PsTransport> MakeSession(const AgentOptions& agent) {
  absl::StatusOr<std::unique_ptr<PsTransport>> session = PsTransport::Create(QuickOptions(agent));
  REQUIRE(session.ok());
  return *std::move(session);
}

// Joins as Agent::Init does: the transport joins, the agent adopts what the server said. Returns
// the epsilon the server gave.
absl::StatusOr<double> JoinAndAdopt(ServerTransport& session, AgentOptions* agent) {
  JoinOptions join;
  join.model = agent->model;
  join.model_pinned = agent->pinned.count("model") > 0;
  join.push = agent->push;
  absl::StatusOr<JoinResult> joined = session.Join(kDefaultNumActions, join);
  if (!joined.ok()) return joined.status();
  if (absl::Status s = AdoptRunConfig(joined->config, agent); !s.ok()) return s;
  return joined->epsilon;
}

// A server of a fresh incarnation on `port`, where another one served before.
std::unique_ptr<ps::GrpcParameterServer> StartOn(int port, std::unique_ptr<ps::ParameterServer> core) {
  absl::StatusOr<std::unique_ptr<ps::GrpcParameterServer>> started = ps::GrpcParameterServer::Start(
      std::move(core), absl::StrCat("127.0.0.1:", port), LoopbackServer::PlaintextSecurity());
  REQUIRE(started.ok());
  return *std::move(started);
}

// A session that joined `ps`, pulled, started training, and had one push of one minibatch applied
// and pulled back.
struct OnePushApplied {
  explicit OnePushApplied(const LoopbackServer& ps)
      : agent(Agent(ps)), session(MakeSession(agent)) {
    REQUIRE(JoinAndAdopt(*session, &agent).ok());
    REQUIRE(session->Pull(&online, &target, false).ok());
    session->StartTraining();
    gradient.assign(online.size(), 0.01f);
    REQUIRE(session->Push(gradient, 1).ok());
    REQUIRE(session->Pull(&online, &target, false).ok());
  }

  AgentOptions agent;
  std::unique_ptr<PsTransport> session;
  std::vector<float> online, target, gradient;
};

// Resend tries once; the channel may still be waiting out its reconnect backoff from the outage.
bool RejoinWithin(ServerTransport* session, absl::Duration timeout) {
  return testing::WaitUntil([&] { return session->Resend().ok(); }, timeout);
}

TEST_CASE("Update rules parse from their wire names, and push modes must fit them",
          "[ps_transport]") {
  CHECK(*ParseUpdateRule("gradients") == UpdateRule::kGradients);
  CHECK(*ParseUpdateRule("delta") == UpdateRule::kDelta);
  for (const char* unknown : {"deltas", "", "Gradients"}) {
    const absl::StatusOr<UpdateRule> rule = ParseUpdateRule(unknown);
    CHECK(rule.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(rule.status().message()),
               Catch::Matchers::ContainsSubstring(absl::StrCat("'", unknown, "'")));
  }
  CHECK(CheckPushModeFits(PushMode::kGradients, UpdateRule::kGradients).ok());
  CHECK(CheckPushModeFits(PushMode::kDeltas, UpdateRule::kDelta).ok());
  CHECK_THAT(std::string(CheckPushModeFits(PushMode::kGradients, UpdateRule::kDelta).message()),
             Catch::Matchers::ContainsSubstring("--push=deltas"));
  CHECK_THAT(std::string(CheckPushModeFits(PushMode::kDeltas, UpdateRule::kGradients).message()),
             Catch::Matchers::ContainsSubstring("--optimizer=delta"));

  CHECK(*ParsePushMode("gradients") == PushMode::kGradients);
  CHECK(*ParsePushMode("deltas") == PushMode::kDeltas);
  for (PushMode mode : {PushMode::kGradients, PushMode::kDeltas}) {
    CHECK(*ParsePushMode(PushModeName(mode)) == mode);
  }
  CHECK(ParsePushMode("delta").status().message() ==
        "--push must be gradients or deltas, got 'delta'");
}

TEST_CASE("A transport joins and adopts the server's run settings, and refuses a pinned one",
          "[ps_transport]") {
  ps::ParameterServerOptions server = CompactServer();
  server.batch_size = 64;
  server.gamma = 0.9;
  server.n_step = 2;
  server.target_update_frequency = 100;
  server.target_update_tau = 0.25;
  LoopbackServer ps(server);
  AgentOptions agent = Agent(ps);
  agent.model = "tiny";  // Not pinned: the server's model is taken.
  std::unique_ptr<PsTransport> session = MakeSession(agent);
  absl::StatusOr<double> epsilon = JoinAndAdopt(*session, &agent);
  REQUIRE(epsilon.ok());
  CHECK(*epsilon == 1.0);
  CHECK(agent.model == "compact");
  CHECK(agent.batch_size == 64);
  CHECK(agent.gamma == 0.9);
  CHECK(agent.n_step == 2);
  CHECK(agent.target_update_frequency == 100);
  CHECK(agent.target_update_tau == 0.25);
  CHECK(ps.Status().agents().size() == 1);

  AgentOptions pinned = Agent(ps);
  pinned.batch_size = 16;
  pinned.pinned = {"batch_size"};
  const absl::StatusOr<double> refused = JoinAndAdopt(*MakeSession(pinned), &pinned);
  CHECK(refused.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(refused.status().message()),
             Catch::Matchers::ContainsSubstring("--batch_size=16") &&
                 Catch::Matchers::ContainsSubstring("server's 64") &&
                 Catch::Matchers::ContainsSubstring("convoy_ps with --batch_size=16"));
  CHECK(pinned.batch_size == 16);

  AgentOptions deltas = Agent(ps);
  deltas.push = PushMode::kDeltas;
  CHECK(JoinAndAdopt(*MakeSession(deltas), &deltas).status().code() ==
        absl::StatusCode::kInvalidArgument);
}

// Records what a transport tells its observer.
class RecordingObserver final : public SyncObserver {
 public:
  void Trained(const std::string&, uint64_t) override { ++trained; }
  void Answered(const LoggedPush& push, const PushAnswer& answer) override {
    answers.emplace_back(push, answer);
  }
  int trained = 0;
  std::vector<std::pair<LoggedPush, PushAnswer>> answers;
};

TEST_CASE("A transport tells its observer every answer to a push, naming the push",
          "[ps_transport]") {
  LoopbackServer ps(CompactServer());
  AgentOptions agent = Agent(ps);
  auto observer = std::make_shared<RecordingObserver>();
  absl::StatusOr<std::unique_ptr<PsTransport>> created =
      PsTransport::Create(QuickOptions(agent), observer);
  REQUIRE(created.ok());
  PsTransport& session = **created;
  REQUIRE(JoinAndAdopt(session, &agent).ok());
  std::vector<float> online, target;
  REQUIRE(session.Pull(&online, &target, false).ok());
  session.StartTraining();
  const std::vector<float> gradient(online.size(), 0.01f);
  REQUIRE(session.Push(gradient, 3).ok());
  REQUIRE(session.Pull(&online, &target, false).ok());
  REQUIRE(session.Push(gradient, 2).ok());

  REQUIRE(observer->answers.size() == 2);
  const auto& [first, first_answer] = observer->answers[0];
  const auto& [second, second_answer] = observer->answers[1];
  CHECK(first.agent_id == "session-test");
  CHECK(first.minibatches == 3);
  CHECK(second.minibatches == 2);
  CHECK(second.session == first.session);
  CHECK(second.sequence == first.sequence + 1);
  CHECK(first_answer.version == first.base_version + 1);
  CHECK(second.base_version == first_answer.version);
  CHECK(first_answer.accepted);
  CHECK(second_answer.accepted);
  CHECK(second_answer.version == first_answer.version + 1);
  CHECK(observer->trained == 0);  // Training is the agent's to tell, not the transport's.
}

TEST_CASE("Pushes advance the server's version and pulls bring the weights and target along",
          "[ps_transport]") {
  ps::ParameterServerOptions server = CompactServer();
  server.target_update_frequency = 4;  // Minibatches.
  LoopbackServer ps(server);
  AgentOptions agent = Agent(ps);
  std::unique_ptr<PsTransport> session = MakeSession(agent);
  REQUIRE(JoinAndAdopt(*session, &agent).ok());
  std::vector<float> online, target;
  absl::StatusOr<PullUpdate> pulled = session->Pull(&online, &target, false);
  REQUIRE(pulled.ok());
  CHECK(pulled->online);
  CHECK(pulled->target);  // A first pull takes the target of this incarnation too.
  CHECK(session->version() == 0);
  CHECK(session->incarnation() == ps.server->core().incarnation());
  CHECK(online == ps.server->core().Snapshot(v1::NETWORK_ONLINE)->values);
  session->StartTraining();

  const std::vector<float> gradient(online.size(), 0.01f);
  absl::StatusOr<PushAnswer> pushed = session->Push(gradient, 2);
  REQUIRE(pushed.ok());
  CHECK(pushed->accepted);
  CHECK(pushed->version == 1);
  pulled = session->Pull(&online, &target, false);
  REQUIRE(pulled.ok());
  CHECK(pulled->online);
  CHECK_FALSE(pulled->target);  // Two minibatches of four: the target stays.
  CHECK(session->version() == 1);
  CHECK(online == ps.server->core().Snapshot(v1::NETWORK_ONLINE)->values);
  pulled = session->Pull(&online, &target, false);
  REQUIRE(pulled.ok());
  CHECK_FALSE(pulled->online);  // Already current.

  pushed = session->Push(gradient, 2);  // Four minibatches: the server refreshes its target.
  REQUIRE(pushed.ok());
  CHECK(pushed->target_version == 2);
  pulled = session->Pull(&online, &target, false);
  REQUIRE(pulled.ok());
  CHECK(pulled->online);
  CHECK(pulled->target);
  CHECK(session->version() == 2);
  CHECK(target == ps.server->core().Snapshot(v1::NETWORK_TARGET)->values);
  CHECK(ps.Status().applied_minibatches() == 4);
}

TEST_CASE("A push that got no answer reaches the server exactly once after a rejoin",
          "[ps_transport][faults]") {
  LoopbackServer ps(CompactServer());
  const int port = ps.server->port();
  OnePushApplied trained(ps);
  auto& [agent, session, online, target, gradient] = trained;

  // Unreachable: nothing serves the port; the server keeps its state and incarnation.
  std::unique_ptr<ps::ParameterServer> core = ps.server->TakeCore();
  const uint64_t incarnation = core->incarnation();
  const absl::StatusOr<PushAnswer> lost = session->Push(gradient, 3);
  CHECK(lost.status().code() == absl::StatusCode::kUnavailable);
  CHECK(session->has_pending_push());
  CHECK(session->Resend().status().code() == absl::StatusCode::kUnavailable);
  CHECK(session->has_pending_push());

  std::unique_ptr<ps::GrpcParameterServer> back = StartOn(port, std::move(core));
  REQUIRE(RejoinWithin(session.get(), absl::Seconds(30)));
  CHECK_FALSE(session->has_pending_push());
  REQUIRE(session->Push(gradient, 2).ok());  // What the agent learned meanwhile.
  REQUIRE(session->Pull(&online, &target, /*whatever_held=*/true).ok());
  CHECK(session->incarnation() == incarnation);
  const v1::StatusResponse status = back->core().Status();
  CHECK(status.applied_minibatches() == 1 + 3 + 2);
  CHECK(status.updates_applied() == 3);
  CHECK(status.rejections().empty());
  CHECK(session->version() == 3);
}

TEST_CASE(
    "After rejoin attempts refused while the server was away, the first attempt once it is back "
    "takes",
    "[ps_transport][faults]") {
  LoopbackServer ps(CompactServer());
  const int port = ps.server->port();
  OnePushApplied trained(ps);
  auto& [agent, session, online, target, gradient] = trained;
  std::unique_ptr<ps::ParameterServer> core = ps.server->TakeCore();
  CHECK_FALSE(session->Push(gradient, 1).ok());
  // Each refused at once; gRPC would now hold the channels in its reconnect backoff.
  for (int i = 0; i < 5; ++i) {
    CHECK(session->Resend().status().code() == absl::StatusCode::kUnavailable);
  }
  std::unique_ptr<ps::GrpcParameterServer> back = StartOn(port, std::move(core));
  // A fresh channel connects at once, for the Join and for the resent push alike.
  const absl::StatusOr<double> rejoined = session->Resend();
  CHECK(rejoined.ok());
  CHECK_FALSE(session->has_pending_push());
  CHECK(back->core().Status().updates_applied() == 2);
}

TEST_CASE("A transport rejoins a server started afresh and takes its new incarnation's weights",
          "[ps_transport][faults]") {
  LoopbackServer ps(CompactServer());
  const int port = ps.server->port();
  OnePushApplied trained(ps);
  auto& [agent, session, online, target, gradient] = trained;
  const uint64_t old_incarnation = session->incarnation();
  CHECK(session->version() == 1);

  ps.server.reset();  // The server is gone, its state with it.
  CHECK_FALSE(session->Push(gradient, 1).ok());
  ps::ParameterServerOptions fresh = CompactServer();
  fresh.seed = 99;  // Other initial weights than the first server's.
  absl::StatusOr<std::unique_ptr<ps::ParameterServer>> core = ps::ParameterServer::Create(fresh);
  REQUIRE(core.ok());
  const uint64_t new_incarnation = (*core)->incarnation();
  REQUIRE(new_incarnation != old_incarnation);
  std::unique_ptr<ps::GrpcParameterServer> restarted = StartOn(port, *std::move(core));

  REQUIRE(RejoinWithin(session.get(), absl::Seconds(30)));
  // The push that got no answer was resent and refused: it was computed on the old incarnation.
  CHECK_FALSE(session->has_pending_push());
  absl::StatusOr<PullUpdate> pulled = session->Pull(&online, &target, /*whatever_held=*/true);
  REQUIRE(pulled.ok());
  CHECK(pulled->online);
  CHECK(pulled->target);
  CHECK(session->incarnation() == new_incarnation);
  CHECK(session->version() == 0);
  CHECK(online == restarted->core().Snapshot(v1::NETWORK_ONLINE)->values);
  CHECK(restarted->core().Status().updates_applied() == 0);

  absl::StatusOr<PushAnswer> pushed = session->Push(gradient, 1);
  REQUIRE(pushed.ok());
  CHECK(pushed->accepted);
  REQUIRE(session->Pull(&online, &target, false).ok());
  CHECK(session->version() == 1);
}

}  // namespace
}  // namespace convoy::agent
