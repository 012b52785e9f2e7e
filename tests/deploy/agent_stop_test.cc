// An agent stopping while its parameter server does not answer: a server that is gone (killed,
// nothing listens at its port) ends the agent's final sync at once, a server that is only out of
// reach (stopped: the kernel still accepts connections for it) gets the whole --final_sync_for.
#include <signal.h>

#include <optional>
#include <regex>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tests/catch.h"
#include "tests/support/subprocess.h"

namespace convoy::deploy {
namespace {

using testing::MakeTempDir;
using testing::ReadWholeFile;
using testing::Subprocess;
using testing::WaitForFileLine;
using testing::WaitUntil;

// convoy_ps and one convoy_agent training against it over loopback.
struct TrainingPair {
  std::string dir = MakeTempDir("agent_stop");
  std::optional<Subprocess> ps;
  std::optional<Subprocess> agent;

  std::string agent_log() const { return dir + "/agent.log"; }

  // Starts both and returns once the agent has pushed (its report names a server version above 0).
  void Start(const std::string& final_sync_for) {
    absl::StatusOr<Subprocess> server =
        Subprocess::Start({CONVOY_PS_BINARY, "--bind=127.0.0.1", "--port=0",
                           "--port_file=" + dir + "/port", "--insecure", "--model=compact"},
                          dir + "/ps.log");
    REQUIRE(server.ok());
    ps = *std::move(server);
    absl::StatusOr<std::string> port = WaitForFileLine(dir + "/port", absl::Seconds(60));
    INFO(ReadWholeFile(dir + "/ps.log"));
    REQUIRE(port.ok());
    absl::StatusOr<Subprocess> started = Subprocess::Start(
        {CONVOY_AGENT_BINARY, absl::StrCat("--ps=127.0.0.1:", *port), "--insecure",
         "--model=compact", "--torch_threads=1", "--min_replay_size=100",
         "--replay_memory_size=5000", "--report_seconds=0.5", "--max_minutes=20",
         "--final_sync_for=" + final_sync_for},
        agent_log());
    REQUIRE(started.ok());
    agent = *std::move(started);
    const std::regex pushed("PS v[1-9]");
    const bool trains = WaitUntil(
        [&] { return std::regex_search(ReadWholeFile(agent_log()), pushed); }, absl::Seconds(180));
    INFO(ReadWholeFile(agent_log()));
    REQUIRE(trains);
  }
};

TEST_CASE("An agent whose server was killed ends its final sync at once, not after final_sync_for",
          "[agent_stop]") {
  TrainingPair run;
  run.Start("60s");
  run.ps->Signal(SIGKILL);
  REQUIRE(run.ps->Wait(absl::Seconds(10)).has_value());
  run.agent->Signal(SIGTERM);
  // Far less than the 60 s it would try for a server out of reach.
  const std::optional<int> code = run.agent->Wait(absl::Seconds(30));
  const std::string log = ReadWholeFile(run.agent_log());
  INFO(log);
  REQUIRE(code == 0);
  CHECK(absl::StrContains(log, "the final sync ended after"));
  CHECK(absl::StrContains(log, "nothing listens at the parameter server's address"));
  CHECK_FALSE(absl::StrContains(log, "stayed away"));
}

TEST_CASE("An agent whose server is stopped, not gone, tries for all of final_sync_for",
          "[agent_stop]") {
  TrainingPair run;
  run.Start("3s");
  // Stopped, convoy_ps answers nothing, yet the kernel still accepts connections on its port: the
  // agent cannot tell it from a partition, and keeps trying.
  run.ps->Signal(SIGSTOP);
  // The agent keeps learning while its exchange waits, so it owes the server minibatches when told
  // to stop, even if the exchange in flight had got its answer and weights before the stop.
  absl::SleepFor(absl::Seconds(1));
  run.agent->Signal(SIGTERM);
  const std::optional<int> code = run.agent->Wait(absl::Seconds(120));
  run.ps->Signal(SIGKILL);
  const std::string log = ReadWholeFile(run.agent_log());
  INFO(log);
  REQUIRE(code == 0);
  CHECK(absl::StrContains(log, "the parameter server stayed away for 3s"));
  CHECK_FALSE(absl::StrContains(log, "the final sync ended after"));
}

}  // namespace
}  // namespace convoy::deploy
