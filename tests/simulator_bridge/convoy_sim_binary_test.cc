// The convoy_sim binary itself: flags, the printed port, serving, its metrics, and a clean exit on
// SIGTERM.
#include <signal.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"
#include "common/metrics/metric_table.h"
#include "common/settings/flag_ranges.h"
#include "simulator_bridge/airsim/airsim_client.h"
#include "tests/catch.h"
#include "tests/support/http.h"
#include "tests/support/subprocess.h"

namespace convoy::sim {
namespace {

constexpr char kListening[] = "convoy_sim listening on ";

// The port convoy_sim printed into its log, or 0 while it has not.
int PrintedPort(const std::string& log_path) {
  const std::string log = testing::ReadWholeFile(log_path);
  const size_t at = log.find(kListening);
  if (at == std::string::npos) return 0;
  const size_t end = log.find('\n', at);
  if (end == std::string::npos) return 0;
  const size_t colon = log.rfind(':', end);
  return colon == std::string::npos || colon < at ? 0 : std::atoi(log.c_str() + colon + 1);
}

TEST_CASE("convoy_sim prints its ephemeral port, serves, and exits cleanly on SIGTERM",
          "[convoy_sim]") {
  const std::string log = testing::MakeTempDir("convoy_sim") + "/convoy_sim.log";
  absl::StatusOr<testing::Subprocess> sim = testing::Subprocess::Start(
      {CONVOY_SIM_BINARY, "--port=0", "--clock=lockstep", "--scenario=parked", "--seed=3"}, log);
  REQUIRE(sim.ok());
  int port = 0;
  CHECK(testing::WaitUntil([&] { return (port = PrintedPort(log)) > 0; }, absl::Seconds(30)));
  INFO(testing::ReadWholeFile(log));
  REQUIRE(port > 0);
  {
    AirSimClientOptions options;
    options.port = port;
    absl::StatusOr<std::unique_ptr<AirSimClient>> client = AirSimClient::Connect(options);
    REQUIRE(client.ok());
    CHECK(*(*client)->IsPaused());
    REQUIRE((*client)->ContinueForTime(absl::Seconds(1)).ok());
    CHECK((*client)->GetState()->timestamp == 1000000000u);
  }
  sim->Signal(SIGTERM);
  CHECK(sim->Wait(absl::Seconds(10)) == std::optional<int>(0));
}

TEST_CASE("convoy_sim rejects a bad clock mode", "[convoy_sim]") {
  const std::string log = testing::MakeTempDir("convoy_sim") + "/convoy_sim.log";
  absl::StatusOr<testing::Subprocess> sim =
      testing::Subprocess::Start({CONVOY_SIM_BINARY, "--port=0", "--clock=sometimes"}, log);
  REQUIRE(sim.ok());
  CHECK(sim->Wait(absl::Seconds(30)) == std::optional<int>(kExitUsage));
  CHECK(testing::ReadWholeFile(log).find("--clock must be realtime or lockstep, not 'sometimes'") !=
        std::string::npos);
}

TEST_CASE("convoy_sim serves its metrics as the metric table declares them", "[convoy_sim]") {
  const std::string dir = testing::MakeTempDir("convoy_sim");
  absl::StatusOr<testing::Subprocess> sim = testing::Subprocess::Start(
      {CONVOY_SIM_BINARY, "--port=0", "--clock=lockstep", "--scenario=parked",
       "--metrics_address=127.0.0.1:0", "--metrics_port_file=" + dir + "/metrics_port"},
      dir + "/convoy_sim.log");
  REQUIRE(sim.ok());
  int port = 0;
  CHECK(testing::WaitUntil([&] { return (port = PrintedPort(dir + "/convoy_sim.log")) > 0; },
                           absl::Seconds(30)));
  INFO(testing::ReadWholeFile(dir + "/convoy_sim.log"));
  REQUIRE(port > 0);
  int metrics_port = 0;
  REQUIRE(absl::SimpleAtoi(
      absl::StripAsciiWhitespace(testing::ReadWholeFile(dir + "/metrics_port")), &metrics_port));
  {
    AirSimClientOptions options;
    options.port = port;
    absl::StatusOr<std::unique_ptr<AirSimClient>> client = AirSimClient::Connect(options);
    REQUIRE(client.ok());
    REQUIRE((*client)->ContinueForTime(absl::Seconds(1)).ok());
  }
  absl::StatusOr<testing::HttpAnswer> scrape =
      testing::HttpExchange(metrics_port, "GET /metrics HTTP/1.0\r\n\r\n");
  REQUIRE(scrape.ok());
  INFO(scrape->body);
  CHECK(absl::StrContains(scrape->status_line, "200"));
  CHECK(absl::StrContains(scrape->body, "convoy_sim_steps_total{vehicle=\"PhysXCar\"}"));
  CHECK(absl::StrContains(scrape->body, "convoy_sim_connections_total{result=\"accepted\"} 1"));
  const absl::Status as_declared = CheckScrapeAgainstTable(scrape->body);
  INFO(as_declared);
  CHECK(as_declared.ok());
  sim->Signal(SIGTERM);
  CHECK(sim->Wait(absl::Seconds(10)) == std::optional<int>(0));
}

}  // namespace
}  // namespace convoy::sim
