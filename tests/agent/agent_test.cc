// The agent loop for real: the embedded simulator, a real parameter server over loopback, restarts
// of the server and of an AirSim-protocol simulator under a running agent.
#include "agent/agent.h"

#include <signal.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "agent/client/ps_transport.h"
#include "common/model/weights_file.h"
#include "common/support/status_macros.h"
#include "tests/catch.h"
#include "tests/param_server/service/loopback_server.h"
#include "tests/support/subprocess.h"

namespace convoy::agent {
namespace {

using testing::MakeTempDir;
using testing::ReadWholeFile;
using testing::Subprocess;
using testing::WaitForFileLine;

AgentOptions SmallAgent(const std::string& log_dir) {
  AgentOptions o;
  o.model = "compact";
  o.replay_memory_size = 5000;
  o.min_replay_size = 200;
  o.max_steps = 600;
  // 1-step returns keep the counts exact: each step is a transition to sample at once (3-step ones
  // wait for the two steps after them). With a server the agent adopts the server's n_step instead.
  o.n_step = 1;
  o.log_dir = log_dir;
  o.report_every = absl::Seconds(1);
  return o;
}

// A delta-rule server (w += pushed tensor) of the agents' model, for --push=deltas.
ps::ParameterServerOptions DeltaServer() {
  ps::ParameterServerOptions o;
  o.model = "compact";
  o.optimizer.kind = ps::Optimizer::kDelta;
  return o;
}

// A compact-model server for agents pushing `push` (a delta-rule one for deltas).
ps::ParameterServerOptions ServerFor(PushMode push) {
  ps::ParameterServerOptions o = push == PushMode::kDeltas ? DeltaServer() : ps::ParameterServerOptions{};
  o.model = "compact";
  return o;
}

// A SmallAgent of `ps`, pushing `push`.
AgentOptions SmallAgentOf(const testing::LoopbackServer& ps, PushMode push) {
  AgentOptions o = SmallAgent("");
  o.ps_address = ps.address;
  o.push = push;
  return o;
}

// A parameter server of two shards on loopback, and a small agent pushing `push` that lists both in
// shard order.
struct TwoShardRun {
  std::vector<std::unique_ptr<testing::LoopbackServer>> shards;
  AgentOptions agent;
};
TwoShardRun TwoShards(PushMode push) {
  TwoShardRun run;
  for (uint32_t i = 0; i < 2; ++i) {
    ps::ParameterServerOptions shard = ServerFor(push);
    shard.num_shards = 2;
    shard.shard_index = i;
    run.shards.push_back(std::make_unique<testing::LoopbackServer>(shard));
  }
  run.agent = SmallAgentOf(*run.shards[0], push);
  run.agent.ps_address = run.shards[0]->address + "," + run.shards[1]->address;
  return run;
}

// An agent running on its own thread, as convoy_agent runs it, until Stop().
class BackgroundAgent {
 public:
  explicit BackgroundAgent(const AgentOptions& options) {
    absl::StatusOr<std::unique_ptr<Agent>> created = Agent::Create(options);
    REQUIRE(created.ok());
    agent_ = *std::move(created);
    runner_ = std::thread([this] { result_ = agent_->Run(stop_); });
  }
  ~BackgroundAgent() { Stop().IgnoreError(); }

  Agent& agent() { return *agent_; }
  absl::Status Stop() {
    stop_ = true;
    if (runner_.joinable()) runner_.join();
    return result_;
  }

 private:
  std::unique_ptr<Agent> agent_;
  std::atomic<bool> stop_{false};
  absl::Status result_;
  std::thread runner_;
};

bool WaitFor(const std::function<bool()>& condition) {
  return testing::WaitUntil(condition, absl::Seconds(120));
}

// `ps` stops serving (it keeps its state and incarnation) until `agent`, out of step, has learned more on
// its own or finished its `max_steps`; then it serves again on the same port. Returns the server back.
absl::StatusOr<std::unique_ptr<ps::GrpcParameterServer>> AwayAndBack(Agent& agent,
                                                                 testing::LoopbackServer& ps,
                                                                 uint64_t max_steps) {
  const int port = ps.server->port();
  std::unique_ptr<ps::ParameterServer> core = ps.server->TakeCore();
  REQUIRE(WaitFor([&] { return !agent.stats().connected; }));
  const uint64_t trained_at_outage = agent.stats().train_steps;
  REQUIRE(WaitFor([&] {
    const AgentStats s = agent.stats();
    return s.train_steps >= trained_at_outage + 12 || s.env_steps >= max_steps;
  }));
  absl::StatusOr<std::unique_ptr<ps::GrpcParameterServer>> back = ps::GrpcParameterServer::Start(
      std::move(core), absl::StrCat("127.0.0.1:", port), testing::LoopbackServer::PlaintextSecurity());
  REQUIRE(back.ok());
  return back;
}

TEST_CASE("An agent alone acts and learns and logs CSV and TensorBoard and saves weights",
          "[agent]") {
  const std::string dir = MakeTempDir("agent");
  absl::StatusOr<std::unique_ptr<Agent>> agent = Agent::Create(SmallAgent(dir));
  REQUIRE(agent.ok());
  std::atomic<bool> stop{false};
  REQUIRE((*agent)->Run(stop).ok());
  const AgentStats stats = (*agent)->stats();
  CHECK(stats.env_steps == 600);
  CHECK(stats.episodes > 0);
  // 400 steps after the 200-transition warm-up at 8 sampled transitions per step, 32 per minibatch.
  CHECK(stats.train_steps == 100);
  const std::string episodes = ReadWholeFile(dir + "/episodes.csv");
  CHECK(episodes.rfind("episode,env_steps,return", 0) == 0);
  CHECK(std::count(episodes.begin(), episodes.end(), '\n') ==
        static_cast<long>(stats.episodes) + 1);
  CHECK_FALSE(ReadWholeFile(dir + "/intervals.csv").empty());
  bool has_events = false;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    has_events |= e.path().filename().string().rfind("events.out.tfevents.", 0) == 0;
  }
  CHECK(has_events);
  absl::StatusOr<std::vector<float>> saved =
      ReadWeightsFile(dir + "/weights.pt", DescribeModel("compact")->layout);
  REQUIRE(saved.ok());
  CHECK(*saved == (*agent)->Weights());
}

TEST_CASE("An agent pushes to and pulls from a real parameter server", "[agent]") {
  ps::ParameterServerOptions ps_options;
  ps_options.model = "compact";
  ps_options.n_step = 1;  // As SmallAgent alone: 100 minibatches exactly.
  testing::LoopbackServer ps(ps_options);
  AgentOptions o = SmallAgent("");
  o.ps_address = ps.address;
  absl::StatusOr<std::unique_ptr<Agent>> agent = Agent::Create(o);
  REQUIRE(agent.ok());
  std::atomic<bool> stop{false};
  REQUIRE((*agent)->Run(stop).ok());
  const AgentStats stats = (*agent)->stats();
  // 100 minibatches, a push every 4.
  CHECK(stats.pushes == 25);
  const v1::StatusResponse status = ps.Status();
  CHECK(status.updates_applied() == 25 - stats.pushes_rejected);
  CHECK(status.applied_minibatches() == 4 * status.updates_applied());
  CHECK(stats.ps_version == status.version());
  // The agent ends on the server's weights.
  CHECK((*agent)->Weights() == ps.server->core().Snapshot(v1::NETWORK_ONLINE)->values);
  // Epsilon came from the server's schedule: 1 - 0.003 per applied update.
  CHECK(stats.epsilon == Approx(1.0 - 0.003 * status.updates_applied()).margin(1e-9));
}

TEST_CASE("An agent pushing weight deltas moves a delta-rule server to its own weights",
          "[agent]") {
  testing::LoopbackServer ps(DeltaServer());
  AgentOptions o = SmallAgent("");
  o.ps_address = ps.address;
  o.push = PushMode::kDeltas;
  absl::StatusOr<std::unique_ptr<Agent>> agent = Agent::Create(o);
  REQUIRE(agent.ok());
  std::atomic<bool> stop{false};
  REQUIRE((*agent)->Run(stop).ok());
  CHECK((*agent)->stats().pushes == 25);
  CHECK(ps.Status().updates_applied() == 25);
  // Alone against the server, each delta carries the agent's weights exactly onto the server's.
  const std::vector<float>& server = ps.server->core().Snapshot(v1::NETWORK_ONLINE)->values;
  const std::vector<float> local = (*agent)->Weights();
  REQUIRE(server.size() == local.size());
  for (size_t i = 0; i < local.size(); ++i) REQUIRE(server[i] == Approx(local[i]).margin(1e-6));
  // A gradient agent is refused by a delta server, and the other way round.
  o.push = PushMode::kGradients;
  CHECK(Agent::Create(o).status().code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("Prioritized replay with n-step returns trains alone", "[agent]") {
  AgentOptions o = SmallAgent("");
  o.prioritized = true;
  o.n_step = 3;
  absl::StatusOr<std::unique_ptr<Agent>> agent = Agent::Create(o);
  REQUIRE(agent.ok());
  std::atomic<bool> stop{false};
  REQUIRE((*agent)->Run(stop).ok());
  // n-step windows hold the newest transitions back, so learning starts a few steps later.
  CHECK((*agent)->stats().train_steps >= 95);
  CHECK((*agent)->stats().train_steps <= 100);
  CHECK((*agent)->stats().env_steps == 600);
}

TEST_CASE("An agent runs the server's model unless it was given another one explicitly", "[agent]") {
  ps::ParameterServerOptions ps_options;
  ps_options.model = "cookbook";
  testing::LoopbackServer ps(ps_options);
  AgentOptions o = SmallAgent("");
  o.ps_address = ps.address;
  absl::StatusOr<std::unique_ptr<Agent>> adopted = Agent::Create(o);
  REQUIRE(adopted.ok());
  CHECK((*adopted)->options().model == "cookbook");
  o.pinned = {"model"};  // --model=compact given explicitly.
  absl::StatusOr<std::unique_ptr<Agent>> refused = Agent::Create(o);
  CHECK(refused.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(refused.status().message()),
             Catch::Matchers::ContainsSubstring("--model=compact") &&
                 Catch::Matchers::ContainsSubstring("cookbook") &&
                 Catch::Matchers::ContainsSubstring("convoy_ps with --model=compact"));
}

TEST_CASE("An agent adopts the server's run settings, and refuses one pinned to another value",
          "[agent][run_config]") {
  ps::ParameterServerOptions ps_options;
  ps_options.model = "compact";
  ps_options.batch_size = 64;
  ps_options.batch_update_frequency = 8;
  ps_options.gamma = 0.9;
  ps_options.n_step = 2;
  ps_options.double_dqn = false;
  ps_options.mirror_augmentation = false;
  ps_options.learner_max_grad_norm = 5;
  ps_options.learning_rate = 5e-4;
  ps_options.target_update_frequency = 100;
  testing::LoopbackServer ps(ps_options);
  AgentOptions o = SmallAgent("");
  o.ps_address = ps.address;
  o.replay_ratio = 16;  // 0.25 minibatches of 64 per step from the 200th: 100 minibatches.
  absl::StatusOr<std::unique_ptr<Agent>> agent = Agent::Create(o);
  REQUIRE(agent.ok());
  const AgentOptions& in_force = (*agent)->options();
  CHECK(in_force.batch_size == 64);
  CHECK(in_force.batch_update_frequency == 8);
  CHECK(in_force.gamma == 0.9);
  CHECK(in_force.n_step == 2);
  CHECK_FALSE(in_force.double_dqn);
  CHECK_FALSE(in_force.mirror_augmentation);
  CHECK(in_force.learner_max_grad_norm == 5);
  CHECK(in_force.learning_rate == 5e-4);
  CHECK(in_force.target_update_frequency == 100);
  std::atomic<bool> stop{false};
  REQUIRE((*agent)->Run(stop).ok());
  const AgentStats stats = (*agent)->stats();
  CHECK(stats.last_batch_size == 64);
  // Pushes of 8 minibatches, the last 4 at the end of the run: every minibatch reached the server.
  const v1::StatusResponse status = ps.Status();
  CHECK(stats.train_steps >= 95);
  CHECK(status.applied_minibatches() == stats.train_steps);
  CHECK(status.updates_applied() == (stats.train_steps + 7) / 8);

  o.batch_size = 16;
  o.pinned = {"batch_size"};
  absl::StatusOr<std::unique_ptr<Agent>> refused = Agent::Create(o);
  CHECK(refused.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(refused.status().message()),
             Catch::Matchers::ContainsSubstring("--batch_size=16") &&
                 Catch::Matchers::ContainsSubstring("server's 64"));
  o.batch_size = 64;  // Pinned to the server's own value: fine.
  CHECK(Agent::Create(o).ok());
}

TEST_CASE("The last local steps of a run reach the server, also pushing deltas", "[agent]") {
  testing::LoopbackServer ps(DeltaServer());
  AgentOptions o = SmallAgent("");
  o.ps_address = ps.address;
  o.push = PushMode::kDeltas;
  o.max_steps = 590;  // 97 minibatches: 24 pushes of 4, and the last one.
  absl::StatusOr<std::unique_ptr<Agent>> agent = Agent::Create(o);
  REQUIRE(agent.ok());
  std::atomic<bool> stop{false};
  REQUIRE((*agent)->Run(stop).ok());
  const AgentStats stats = (*agent)->stats();
  REQUIRE(stats.train_steps % 4 != 0);
  CHECK(ps.Status().applied_minibatches() == stats.train_steps);
  CHECK(ps.Status().updates_applied() == (stats.train_steps + 3) / 4);
  // The server holds the agent's final weights.
  const std::vector<float>& server = ps.server->core().Snapshot(v1::NETWORK_ONLINE)->values;
  const std::vector<float> local = (*agent)->Weights();
  for (size_t i = 0; i < local.size(); ++i) REQUIRE(server[i] == Approx(local[i]).margin(1e-6));
}

TEST_CASE("What an agent learns while the server is unreachable reaches it once it is back",
          "[agent][faults]") {
  for (const std::string push : {"gradients", "deltas"}) {
    DYNAMIC_SECTION("push=" << push) {
      testing::LoopbackServer ps(ServerFor(*ParsePushMode(push)));
      AgentOptions o = SmallAgentOf(ps, *ParsePushMode(push));
      o.max_steps = 1000;
      o.final_sync_for = absl::Seconds(60);
      BackgroundAgent background(o);
      Agent& agent = background.agent();
      REQUIRE(WaitFor([&] { return agent.stats().ps_version >= 3; }));
      absl::StatusOr<std::unique_ptr<ps::GrpcParameterServer>> back = AwayAndBack(agent, ps, o.max_steps);
      REQUIRE(background.Stop().ok());
      const AgentStats stats = agent.stats();
      const v1::StatusResponse status = (*back)->core().Status();
      CHECK(stats.outage_pushes >= 1);
      // Every minibatch reached the server exactly once: the push that got no answer (resent under its
      // number), the outage's own, the rest.
      CHECK(status.applied_minibatches() == stats.train_steps);
      CHECK(status.rejections().empty());
    }
  }
}

TEST_CASE("An agent trains against a parameter server of two shards, each applying its slice",
          "[agent][shards]") {
  for (const std::string push : {"gradients", "deltas"}) {
    DYNAMIC_SECTION("push=" << push) {
      TwoShardRun run = TwoShards(*ParsePushMode(push));
      const auto& shards = run.shards;
      AgentOptions& o = run.agent;
      if (push == "deltas") {  // The same list from a file.
        const std::string list = MakeTempDir("agent_ps_list") + "/servers";
        std::ofstream(list) << "# shard order\n" << shards[0]->address << "\n\n"
                            << shards[1]->address << "  # the second\n";
        o.ps_address = "@" + list;
      }
      absl::StatusOr<std::unique_ptr<Agent>> agent = Agent::Create(o);
      REQUIRE(agent.ok());
      std::atomic<bool> stop{false};
      REQUIRE((*agent)->Run(stop).ok());
      const AgentStats stats = (*agent)->stats();
      CHECK(stats.pushes == 25);  // 100 minibatches, a push every 4, to both shards.
      std::vector<float> server;
      uint64_t versions = 0;
      for (const auto& shard : shards) {
        const v1::StatusResponse status = shard->Status();
        CHECK(status.applied_minibatches() == stats.train_steps);
        CHECK(status.rejections().empty());
        versions += status.version();
        const std::vector<float>& slice = shard->server->core().Snapshot(v1::NETWORK_ONLINE)->values;
        server.insert(server.end(), slice.begin(), slice.end());
      }
      CHECK(stats.ps_version == versions);
      // The agent ends on the shards' weights, assembled in shard order.
      const std::vector<float> local = (*agent)->Weights();
      REQUIRE(local.size() == server.size());
      for (size_t i = 0; i < local.size(); ++i) REQUIRE(server[i] == Approx(local[i]).margin(1e-6));
    }
  }
}

TEST_CASE("A shard away and back: the others keep training, and every shard applies every minibatch once",
          "[agent][shards][faults]") {
  for (const std::string push : {"gradients", "deltas"}) {
    DYNAMIC_SECTION("push=" << push) {
      TwoShardRun run = TwoShards(*ParsePushMode(push));
      const auto& shards = run.shards;
      AgentOptions& o = run.agent;
      o.max_steps = 1000;
      o.final_sync_for = absl::Seconds(60);
      BackgroundAgent background(o);
      Agent& agent = background.agent();
      REQUIRE(WaitFor([&] { return agent.stats().ps_version >= 6; }));
      // Shard 1 stops serving (keeping its state); shard 0 stays up and must keep taking pushes.
      const int port = shards[1]->server->port();
      std::unique_ptr<ps::ParameterServer> core = shards[1]->server->TakeCore();
      const uint64_t shard0_at_outage = shards[0]->Status().version();
      const uint64_t shard1_at_outage = core->Status().applied_minibatches();
      REQUIRE(WaitFor([&] {
        return shards[0]->Status().version() >= shard0_at_outage + 8 ||
               agent.stats().env_steps >= o.max_steps;
      }));
      CHECK(shards[0]->Status().version() >= shard0_at_outage + 8);
      CHECK(agent.stats().connected);  // In step with shard 0 all along.
      absl::StatusOr<std::unique_ptr<ps::GrpcParameterServer>> back =
          ps::GrpcParameterServer::Start(std::move(core), absl::StrCat("127.0.0.1:", port),
                                     testing::LoopbackServer::PlaintextSecurity());
      REQUIRE(back.ok());
      REQUIRE(background.Stop().ok());
      const AgentStats stats = agent.stats();
      // Shard 1 got what it missed as a catch-up: every minibatch reached each shard once.
      const v1::StatusResponse status1 = (*back)->core().Status();
      CHECK(status1.applied_minibatches() > shard1_at_outage);
      for (const v1::StatusResponse& status : {shards[0]->Status(), status1}) {
        CHECK(status.applied_minibatches() == stats.train_steps);
        CHECK(status.rejections().empty());
      }
    }
  }
}

TEST_CASE("An agent's --ps takes servers from a list or a file, and names what is wrong with either",
          "[agent][shards]") {
  CHECK(*ParseServerList("a:1") == std::vector<std::string>{"a:1"});
  CHECK(*ParseServerList("a:1,b:2,c:3") == std::vector<std::string>{"a:1", "b:2", "c:3"});
  const std::string dir = MakeTempDir("ps_list");
  std::ofstream(dir + "/three") << "# convoy_ps shards, in order\na:1, b:2\n\n\tc:3 # last\r\n";
  CHECK(*ParseServerList("@" + dir + "/three") == std::vector<std::string>{"a:1", "b:2", "c:3"});
  struct Case {
    std::string ps;
    absl::StatusCode code;
    std::string says;
  };
  std::ofstream(dir + "/no_port") << "a:1\nb\n";
  std::ofstream(dir + "/empty") << "# nothing yet\n\n";
  for (const Case& c : std::vector<Case>{
           {"a:1,,b:2", absl::StatusCode::kInvalidArgument, "has an empty address"},
           {"@" + dir + "/no_port", absl::StatusCode::kInvalidArgument,
            "no_port line 2: 'b' is not host:port"},
           {"@" + dir + "/empty", absl::StatusCode::kInvalidArgument, "lists no server"},
           {"@" + dir + "/missing", absl::StatusCode::kNotFound, dir + "/missing"}}) {
    CAPTURE(c.ps);
    absl::StatusOr<std::vector<std::string>> parsed = ParseServerList(c.ps);
    REQUIRE_FALSE(parsed.ok());
    CHECK(parsed.status().code() == c.code);
    CHECK_THAT(std::string(parsed.status().message()), Catch::Matchers::ContainsSubstring(c.says));
  }
}

TEST_CASE("An agent refuses shards listed out of order, or a sharded server given as one",
          "[agent][shards]") {
  TwoShardRun run = TwoShards(PushMode::kGradients);
  const auto& shards = run.shards;
  AgentOptions& o = run.agent;
  for (const std::string& ps : {shards[1]->address + "," + shards[0]->address, shards[0]->address}) {
    o.ps_address = ps;
    absl::StatusOr<std::unique_ptr<Agent>> agent = Agent::Create(o);
    REQUIRE(!agent.ok());
    CHECK(agent.status().code() == absl::StatusCode::kFailedPrecondition);
    CHECK_THAT(std::string(agent.status().message()),
               Catch::Matchers::ContainsSubstring("shard mismatch"));
  }
  o.ps_address = shards[0]->address + ",";
  absl::StatusOr<std::unique_ptr<Agent>> empty = Agent::Create(o);
  REQUIRE(!empty.ok());
  CHECK(empty.status().code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("An agent keeps acting and learning while the server holds a push's answer",
          "[agent][faults]") {
  // A silent link looks like this to the agent: a push sent and no answer for seconds.
  for (const std::string push : {"gradients", "deltas"}) {
    DYNAMIC_SECTION("push=" << push) {
      testing::LoopbackServer ps(ServerFor(*ParsePushMode(push)));
      AgentOptions o = SmallAgentOf(ps, *ParsePushMode(push));
      o.max_steps = 0;
      BackgroundAgent background(o);
      Agent& agent = background.agent();
      REQUIRE(WaitFor([&] { return agent.stats().ps_version >= 3; }));
      constexpr absl::Duration kHold = absl::Seconds(6);
      std::atomic<bool> hold{true};
      AgentStats at_hold, after_wait, at_answer;
      absl::Notification answered;
      ps.server->service().SetAfterApplyHookForTesting([&](const PushAnswer&) {
        if (!hold.exchange(false)) return grpc::Status::OK;
        at_hold = agent.stats();
        absl::SleepFor(o.sync_wait + absl::Milliseconds(500));
        after_wait = agent.stats();
        absl::SleepFor(kHold - o.sync_wait - absl::Milliseconds(500));
        at_answer = agent.stats();
        answered.Notify();
        return grpc::Status::OK;
      });
      REQUIRE(answered.WaitForNotificationWithTimeout(absl::Seconds(60)));
      // While the answer was held the agent acted on (it runs ~100 steps/s here; waiting on the
      // push it would not have moved), and past sync_wait it learned locally, out of step.
      INFO("env steps " << at_hold.env_steps << " -> " << at_answer.env_steps << ", train steps "
                        << at_hold.train_steps << " -> " << after_wait.train_steps << " -> "
                        << at_answer.train_steps);
      CHECK(at_answer.env_steps >= at_hold.env_steps + 100);
      CHECK(!after_wait.connected);
      CHECK(at_answer.train_steps >= after_wait.train_steps + 10);
      // Once answered it catches up: what it learned out of step is pushed, and it is in step again.
      const uint64_t version_at_answer = ps.Status().version();
      REQUIRE(WaitFor([&] {
        const AgentStats s = agent.stats();
        return s.connected && s.outage_pushes >= 1 && s.ps_version >= version_at_answer + 3;
      }));
      REQUIRE(background.Stop().ok());
      const AgentStats stats = agent.stats();
      const v1::StatusResponse status = ps.Status();
      // Every minibatch reached the server exactly once.
      CHECK(status.applied_minibatches() == stats.train_steps);
      CHECK(status.rejections().empty());
      CHECK(status.repeated_pushes() == 0);
    }
  }
}

// A SmallAgent alone keeping replay checkpoints in `dir`.
AgentOptions CheckpointingAgent(const std::string& dir) {
  AgentOptions o = SmallAgent("");
  o.replay_checkpoint_dir = dir;
  return o;
}

absl::StatusOr<AgentStats> RunToEnd(const AgentOptions& options, std::vector<float>* weights) {
  CONVOY_ASSIGN_OR_RETURN(std::unique_ptr<Agent> agent, Agent::Create(options));
  std::atomic<bool> stop{false};
  CONVOY_RETURN_IF_ERROR(agent->Run(stop));
  if (weights != nullptr) *weights = agent->Weights();
  return agent->stats();
}

TEST_CASE("An agent resumed from its replay checkpoint goes on where it stopped",
          "[agent][resume]") {
  const std::string dir = MakeTempDir("agent_resume");
  std::vector<float> weights;
  const absl::StatusOr<AgentStats> first = RunToEnd(CheckpointingAgent(dir), &weights);
  REQUIRE(first.ok());
  CHECK(first->replay_checkpoints == 1);  // At the end of the run (the period is 10 minutes).
  CHECK(first->replay_checkpoint_bytes == std::filesystem::file_size(dir + "/agent-0.replay"));
  CHECK(first->train_steps == 100);

  AgentOptions resumed_options = CheckpointingAgent(dir);
  resumed_options.resume = true;
  resumed_options.max_steps = 900;  // 300 more.
  absl::StatusOr<std::unique_ptr<Agent>> resumed = Agent::Create(resumed_options);
  REQUIRE(resumed.ok());
  const AgentStats start = (*resumed)->stats();
  CHECK(start.env_steps == 600);
  CHECK(start.episodes == first->episodes);
  CHECK(start.train_steps == first->train_steps);
  CHECK(start.replay_size == first->replay_size);
  CHECK(start.resumed_transitions == first->replay_size);
  CHECK(start.average_return == first->average_return);
  CHECK((*resumed)->Weights() == weights);  // Alone, the learner is its own.
  std::atomic<bool> stop{false};
  REQUIRE((*resumed)->Run(stop).ok());
  const AgentStats end = (*resumed)->stats();
  CHECK(end.env_steps == 900);
  // Its memory was full enough at once: it trained on all 300 steps (8 sampled transitions a step,
  // 32 a minibatch), where an agent starting empty would first collect 200.
  CHECK(end.train_steps == 100 + 75);
  AgentOptions fresh_options = CheckpointingAgent(MakeTempDir("agent_fresh"));
  fresh_options.max_steps = 300;
  const absl::StatusOr<AgentStats> fresh = RunToEnd(fresh_options, nullptr);
  REQUIRE(fresh.ok());
  CHECK(fresh->train_steps == 25);

  // Without --resume the same directory starts afresh, and its end overwrites the checkpoint.
  AgentOptions again = CheckpointingAgent(dir);
  again.max_steps = 250;
  const absl::StatusOr<AgentStats> restarted = RunToEnd(again, nullptr);
  REQUIRE(restarted.ok());
  CHECK(restarted->resumed_transitions == 0);
  CHECK(restarted->env_steps == 250);
  again.resume = true;
  again.max_steps = 260;
  absl::StatusOr<std::unique_ptr<Agent>> after = Agent::Create(again);
  REQUIRE(after.ok());
  CHECK((*after)->stats().env_steps == 250);
}

TEST_CASE("A resumed agent of a parameter server takes the server's weights and epsilon",
          "[agent][resume]") {
  ps::ParameterServerOptions ps_options;
  ps_options.model = "compact";
  ps_options.n_step = 1;
  testing::LoopbackServer ps(ps_options);
  const std::string dir = MakeTempDir("agent_resume_ps");
  AgentOptions o = CheckpointingAgent(dir);
  o.ps_address = ps.address;
  REQUIRE(RunToEnd(o, nullptr).ok());
  const uint64_t version = ps.Status().version();
  REQUIRE(version > 0);
  // Meanwhile another agent moves the server on.
  AgentOptions other = SmallAgent("");
  other.ps_address = ps.address;
  other.agent_id = "agent-1";
  other.agent_index = 1;
  REQUIRE(RunToEnd(other, nullptr).ok());
  REQUIRE(ps.Status().version() > version);

  o.resume = true;
  o.max_steps = 900;
  absl::StatusOr<std::unique_ptr<Agent>> resumed = Agent::Create(o);
  REQUIRE(resumed.ok());
  CHECK((*resumed)->stats().env_steps == 600);
  CHECK((*resumed)->Weights() == ps.server->core().Snapshot(v1::NETWORK_ONLINE)->values);
  std::atomic<bool> stop{false};
  REQUIRE((*resumed)->Run(stop).ok());
  const AgentStats end = (*resumed)->stats();
  CHECK(end.env_steps == 900);
  CHECK(end.pushes == 19);  // 75 minibatches: a push every 4, and the last 3 in the final sync.
  CHECK(end.ps_version == ps.Status().version());
  CHECK(end.epsilon == Approx(1.0 - 0.003 * ps.Status().updates_applied()).margin(1e-9));
}

TEST_CASE("A stopped agent saves its replay checkpoint, and saves on its period while it runs",
          "[agent][resume]") {
  const std::string dir = MakeTempDir("agent_resume_stop");
  AgentOptions o = CheckpointingAgent(dir);
  o.max_steps = 0;
  o.replay_checkpoint_every = absl::Milliseconds(100);
  uint64_t steps_at_stop = 0;
  {
    BackgroundAgent background(o);
    Agent& agent = background.agent();
    // Periodic saves while it acts (each after the one before has ended).
    CHECK(WaitFor([&] { return agent.stats().replay_checkpoints >= 2; }));
    CHECK(background.Stop().ok());  // What SIGTERM does in convoy_agent.
    steps_at_stop = agent.stats().env_steps;
    CHECK(agent.stats().replay_checkpoint_failures == 0);
  }
  AgentOptions resumed = CheckpointingAgent(dir);
  resumed.resume = true;
  absl::StatusOr<std::unique_ptr<Agent>> agent = Agent::Create(resumed);
  REQUIRE(agent.ok());
  CHECK((*agent)->stats().env_steps == steps_at_stop);
}

TEST_CASE("Resuming with no checkpoint starts empty; a foreign or torn one is refused naming it",
          "[agent][resume]") {
  const std::string dir = MakeTempDir("agent_resume_bad");
  AgentOptions o = CheckpointingAgent(dir);
  o.resume = true;
  o.max_steps = 250;
  const absl::StatusOr<AgentStats> empty = RunToEnd(o, nullptr);  // None there yet.
  REQUIRE(empty.ok());
  CHECK(empty->resumed_transitions == 0);
  CHECK(empty->env_steps == 250);
  const std::string path = dir + "/agent-0.replay";
  REQUIRE(std::filesystem::exists(path));

  auto refused = [&](const AgentOptions& options) {
    absl::StatusOr<std::unique_ptr<Agent>> agent = Agent::Create(options);
    INFO(agent.status());
    CHECK_FALSE(agent.ok());
    return agent.status();
  };
  // Another agent's file under this agent's name.
  std::filesystem::copy_file(path, dir + "/agent-1.replay");
  AgentOptions other = o;
  other.agent_id = "agent-1";
  absl::Status s = refused(other);
  CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(s.message()), Catch::Matchers::ContainsSubstring(dir + "/agent-1.replay"));
  // Other replay options.
  AgentOptions bigger = o;
  bigger.replay_memory_size = 6000;
  s = refused(bigger);
  CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(s.message()), Catch::Matchers::ContainsSubstring("capacity"));
  // A torn file.
  std::string bytes = ReadWholeFile(path);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes.substr(0, bytes.size() / 2);
  s = refused(o);
  CHECK(s.code() == absl::StatusCode::kDataLoss);
  CHECK_THAT(std::string(s.message()), Catch::Matchers::ContainsSubstring(path));
  // A directory that cannot be made: refused at the start, not when the run's end saves.
  AgentOptions unwritable = o;
  unwritable.resume = false;
  unwritable.replay_checkpoint_dir = path + "/sub";  // Under a file.
  s = refused(unwritable);
  CHECK_THAT(std::string(s.message()), Catch::Matchers::ContainsSubstring(path + "/sub"));
  // --resume without a directory, and an id that cannot be a file name.
  AgentOptions nowhere = SmallAgent("");
  nowhere.resume = true;
  CHECK(refused(nowhere).code() == absl::StatusCode::kInvalidArgument);
  AgentOptions slash = o;
  slash.agent_id = "a/b";
  CHECK(refused(slash).code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("An agent rides out a parameter server killed and restarted", "[agent][faults]") {
  const std::string dir = MakeTempDir("agent_ps");
  const std::string port_file = dir + "/port";
  auto start_ps = [&](int port, bool resume) {
    std::filesystem::remove(port_file);
    std::vector<std::string> argv = {CONVOY_PS_BINARY,
                                     "--model=compact",
                                     "--bind=127.0.0.1",
                                     absl::StrCat("--port=", port),
                                     "--port_file=" + port_file,
                                     "--checkpoint_dir=" + dir + "/ckpt",
                                     "--checkpoint_every_updates=5",
                                     "--checkpoint_every_seconds=0",
                                     "--insecure"};
    if (resume) argv.push_back("--resume");
    absl::StatusOr<Subprocess> ps = Subprocess::Start(argv, dir + "/ps.log");
    REQUIRE(ps.ok());
    absl::StatusOr<std::string> line = WaitForFileLine(port_file, absl::Seconds(60));
    INFO(ReadWholeFile(dir + "/ps.log"));
    REQUIRE(line.ok());
    return std::make_pair(*std::move(ps), std::stoi(*line));
  };
  auto [ps, port] = start_ps(0, false);
  AgentOptions o = SmallAgent("");
  o.ps_address = absl::StrCat("127.0.0.1:", port);
  o.max_steps = 0;
  BackgroundAgent background(o);
  Agent& agent = background.agent();
  CHECK(WaitFor([&] { return agent.stats().ps_version >= 12; }));
  ps.Signal(SIGKILL);
  ps.Wait(absl::Seconds(10));
  const uint64_t steps_at_kill = agent.stats().env_steps;
  const uint64_t version_at_kill = agent.stats().ps_version;
  // Without a server the agent keeps acting and learning.
  CHECK(WaitFor([&] { return agent.stats().env_steps >= steps_at_kill + 300; }));
  auto [restarted, same_port] = start_ps(port, true);
  CHECK(same_port == port);
  // The server resumed from its newest checkpoint; once the agent rejoins, pushes apply past it.
  CHECK(WaitFor([&] { return agent.stats().ps_version > version_at_kill + 2; }));
  CHECK(background.Stop().ok());
  CHECK_THAT(ReadWholeFile(dir + "/ps.log"), Catch::Matchers::ContainsSubstring("resumed from"));
  restarted.Signal(SIGTERM);
  CHECK(restarted.Wait(absl::Seconds(30)) == 0);
}

TEST_CASE("An agent rides out its AirSim-protocol simulator restarting", "[agent][faults]") {
  const std::string dir = MakeTempDir("agent_sim");
  auto start_sim = [&](int port) {
    const std::string log = dir + absl::StrCat("/sim-", port, ".log");
    absl::StatusOr<Subprocess> sim = Subprocess::Start(
        {CONVOY_SIM_BINARY, absl::StrCat("--port=", port), "--clock=lockstep"}, log);
    REQUIRE(sim.ok());
    const std::regex listening("listening on [0-9.]+:([0-9]+)");
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    std::smatch match;
    std::string text;
    while (absl::Now() < deadline) {
      text = ReadWholeFile(log);
      if (std::regex_search(text, match, listening)) break;
      absl::SleepFor(absl::Milliseconds(20));
    }
    INFO(text);
    REQUIRE(match.size() == 2);
    return std::make_pair(*std::move(sim), std::stoi(match[1]));
  };
  auto [sim, port] = start_sim(0);
  AgentOptions o = SmallAgent("");
  o.environment.sim = {SimKind::kAirSim, "127.0.0.1", port};
  o.max_steps = 0;
  BackgroundAgent background(o);
  Agent& agent = background.agent();
  CHECK(WaitFor([&] { return agent.stats().env_steps >= 100; }));
  sim.Signal(SIGKILL);
  sim.Wait(absl::Seconds(10));
  const uint64_t steps_at_kill = agent.stats().env_steps;
  // Restarted once the agent has found its simulator gone.
  CHECK(WaitFor([&] { return agent.stats().simulator_outages >= 1; }));
  auto [restarted, same_port] = start_sim(port);
  CHECK(same_port == port);
  CHECK(WaitFor([&] { return agent.stats().env_steps >= steps_at_kill + 100; }));
  CHECK(background.Stop().ok());
}

}  // namespace
}  // namespace convoy::agent
