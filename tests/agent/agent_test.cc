// The agent loop for real: the embedded simulator, a real parameter server over loopback, restarts
// of the server and of an AirSim-protocol simulator under a running agent.
#include "agent/agent.h"

#include <signal.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/weights_file.h"
#include "tests/param_server/loopback_server.h"
#include "tests/support/subprocess.h"

namespace convoy {
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
  o.log_dir = log_dir;
  o.report_every = absl::Seconds(1);
  return o;
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
  ParameterServerOptions ps_options;
  ps_options.model = "compact";
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
  ParameterServerOptions ps_options;
  ps_options.model = "compact";
  ps_options.optimizer.name = "delta";
  testing::LoopbackServer ps(ps_options);
  AgentOptions o = SmallAgent("");
  o.ps_address = ps.address;
  o.push = "deltas";
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
  o.push = "gradients";
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

TEST_CASE("A model the server does not run is refused at start", "[agent]") {
  ParameterServerOptions ps_options;
  ps_options.model = "tiny";
  testing::LoopbackServer ps(ps_options);
  AgentOptions o = SmallAgent("");
  o.ps_address = ps.address;
  absl::StatusOr<std::unique_ptr<Agent>> agent = Agent::Create(o);
  CHECK(agent.status().code() == absl::StatusCode::kFailedPrecondition);
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
  CHECK_THAT(ReadWholeFile(dir + "/ps.log"), Catch::Contains("resumed from"));
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
  o.environment.sim = absl::StrCat("airsim://127.0.0.1:", port);
  o.max_steps = 0;
  BackgroundAgent background(o);
  Agent& agent = background.agent();
  CHECK(WaitFor([&] { return agent.stats().env_steps >= 100; }));
  sim.Signal(SIGKILL);
  sim.Wait(absl::Seconds(10));
  const uint64_t steps_at_kill = agent.stats().env_steps;
  absl::SleepFor(absl::Milliseconds(500));
  auto [restarted, same_port] = start_sim(port);
  CHECK(same_port == port);
  CHECK(WaitFor([&] { return agent.stats().env_steps >= steps_at_kill + 100; }));
  CHECK(background.Stop().ok());
}

}  // namespace
}  // namespace convoy
