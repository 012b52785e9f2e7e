// The run settings' table (common/run_settings.h): ranges, the RunConfig both ways, adoption and
// pins.
#include "common/run_settings.h"

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "convoy/v1/parameter_server.pb.h"
#include "tests/catch.h"

namespace convoy {
namespace {

// README's paragraph on convoy_ps names the run settings every agent adopts on Join: checked
// against the table, so that a new row cannot be left out of it.
TEST_CASE("README names every run setting of the table as a convoy_ps flag", "[run_settings]") {
  std::ifstream in(CONVOY_SOURCE_DIR "/README.md");
  REQUIRE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  const std::string readme = text.str();
  for (const auto& [flag, value] : RunSettingValues(RunSettings{})) {
    INFO("--" << flag);
    CHECK(readme.find("`--" + flag + "`") != std::string::npos);
  }
}

TEST_CASE("The defaults of every run setting are in their ranges, on the server and in an agent",
          "[run_settings]") {
  CHECK(CheckFlagRanges(RunSettingRanges(RunSettings{})).ok());
  CHECK(CheckFlagRanges(AgentRunSettingRanges(AgentRunSettings{})).ok());
}

TEST_CASE("A run setting out of its range is refused with a message naming its flag",
          "[run_settings]") {
  RunSettings server;
  server.n_step = 0;
  const absl::Status refused = CheckFlagRanges(RunSettingRanges(server));
  CHECK(refused.code() == absl::StatusCode::kInvalidArgument);
  CHECK(refused.message() == "--n_step must be in [1, 100], got 0");

  AgentRunSettings agent;
  agent.max_grad_norm = -1;
  agent.batch_size = -3;
  CHECK(CheckFlagRanges(AgentRunSettingRanges(agent)).message() ==
        "--batch_size must be in [1, 65536], got -3\n--max_grad_norm must be in [0, inf), got -1");
}

TEST_CASE("A launcher passes every run setting on as convoy_ps's flag", "[run_settings]") {
  RunSettings settings;
  settings.gamma = 0.9;
  const std::vector<std::string> args = RunSettingArgs(settings);
  CHECK(std::count(args.begin(), args.end(), "--gamma=0.9") == 1);
  CHECK(std::count(args.begin(), args.end(), "--n_step=3") == 1);
  CHECK(std::count(args.begin(), args.end(), "--double_dqn=true") == 1);
  CHECK(std::count(args.begin(), args.end(), "--learner_max_grad_norm=10") == 1);
  CHECK(std::count(args.begin(), args.end(), "--priority_exponent=0.6") == 1);
}

TEST_CASE("Prioritized replay's priority exponent is a run setting the server hands to agents",
          "[run_settings]") {
  RunSettings server;
  CHECK(server.priority_exponent == 0.6);  // The exponent agents always used.
  server.priority_exponent = 0.4;
  v1::RunConfig config;
  FillRunConfig(server, &config);
  REQUIRE(config.has_priority_exponent());
  CHECK(config.priority_exponent() == 0.4);

  AgentRunSettings agent;
  const std::set<std::string> none;
  RunSettingAdopter adopt(none);
  REQUIRE(AdoptRunSettings(config, &adopt, &agent).ok());
  CHECK(agent.priority_exponent == 0.4);

  AgentRunSettings pinning;
  const std::set<std::string> pinned = {"priority_exponent"};
  RunSettingAdopter refuse(pinned);
  CHECK(AdoptRunSettings(config, &refuse, &pinning).message() ==
        "--priority_exponent=0.6 disagrees with the parameter server's 0.4: the server owns it for "
        "the whole run. Drop --priority_exponent (the agent adopts the server's value), or start "
        "convoy_ps with --priority_exponent=0.6");

  server.priority_exponent = 1.5;
  CHECK(CheckFlagRanges(RunSettingRanges(server)).message() ==
        "--priority_exponent must be in [0, 1], got 1.5");
}

TEST_CASE(
    "An agent adopts every setting of the server's RunConfig, and keeps its own when none is sent",
    "[run_settings]") {
  RunSettings server;
  server.batch_size = 64;
  server.gamma = 0.9;
  server.n_step = 5;
  server.double_dqn = false;
  server.learner_max_grad_norm = 2.5;
  server.prioritized = false;
  v1::RunConfig config;
  FillRunConfig(server, &config);

  AgentRunSettings agent;
  const std::set<std::string> none;
  RunSettingAdopter adopt(none);
  REQUIRE(AdoptRunSettings(config, &adopt, &agent).ok());
  CHECK(agent.batch_size == 64);
  CHECK(agent.gamma == 0.9);
  CHECK(agent.n_step == 5);
  CHECK_FALSE(agent.double_dqn);
  CHECK(agent.max_grad_norm == 2.5);
  CHECK_FALSE(agent.prioritized);
  CHECK(agent.mirror_augmentation == server.mirror_augmentation);
  CHECK(std::count(adopt.adopted().begin(), adopt.adopted().end(), "n_step=5 (alone: 3)") == 1);

  // A server that predates the optional settings sends none of them, and a 0 for the older ones.
  v1::RunConfig old;
  old.set_gamma(0.9);
  AgentRunSettings alone;
  alone.n_step = 7;
  RunSettingAdopter adopt_old(none);
  REQUIRE(AdoptRunSettings(old, &adopt_old, &alone).ok());
  CHECK(alone.n_step == 7);
  CHECK(alone.batch_size == AgentRunSettings{}.batch_size);
  CHECK(alone.gamma == 0.9);
}

TEST_CASE("A pinned setting that disagrees with the server's is refused, naming both flags",
          "[run_settings]") {
  RunSettings server;
  server.learner_max_grad_norm = 2.5;
  v1::RunConfig config;
  FillRunConfig(server, &config);

  AgentRunSettings agent;
  agent.max_grad_norm = 4;
  const std::set<std::string> pinned = {"max_grad_norm"};
  RunSettingAdopter adopt(pinned);
  const absl::Status refused = AdoptRunSettings(config, &adopt, &agent);
  CHECK(refused.code() == absl::StatusCode::kInvalidArgument);
  CHECK(refused.message() ==
        "--max_grad_norm=4 disagrees with the parameter server's 2.5: the server owns it for the "
        "whole run. Drop --max_grad_norm (the agent adopts the server's value), or start convoy_ps "
        "with --learner_max_grad_norm=4");
  CHECK(agent.max_grad_norm == 4);

  // Pinned to the server's own value: nothing to refuse.
  agent.max_grad_norm = 2.5;
  RunSettingAdopter agree(pinned);
  CHECK(AdoptRunSettings(config, &agree, &agent).ok());
}

}  // namespace
}  // namespace convoy
