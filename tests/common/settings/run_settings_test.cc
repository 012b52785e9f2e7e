// The run settings' table (common/settings/run_settings.h) and the agent's own (common/settings/agent_settings.h):
// ranges, the RunConfig both ways, adoption and pins, forwarding, and the documentation of both.
#include "common/settings/run_settings.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/settings/agent_settings.h"
#include "common/settings/run_defaults.h"
#include "convoy/v1/parameter_server.pb.h"
#include "tests/catch.h"

namespace convoy {
namespace {

std::string ReadSourceFile(const std::string& path) {
  std::ifstream in(CONVOY_SOURCE_DIR "/" + path);
  REQUIRE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// README's paragraph on convoy_ps names the run settings every agent adopts on Join: checked
// against the table, so that a new row cannot be left out of it.
TEST_CASE("README names every run setting of the table as a convoy_ps flag", "[run_settings]") {
  const std::string readme = ReadSourceFile("README.md");
  for (const auto& [flag, value] : RunSettingValues(RunSettings{})) {
    INFO("--" << flag);
    CHECK(readme.find("`--" + flag + "`") != std::string::npos);
  }
}

// One default as docs/deploy.md's table of knobs gives it: convoy_ps's (an agent's), and
// convoy_train's where it differs, "4 (convoy_train: 1)".
struct DocumentedDefault {
  std::string value;
  std::optional<std::string> local;
};

// docs/deploy.md's table of knobs, as "--name" -> the default its row gives for it. A row names
// one or more flags in its first cell ("`--a`, `--b`") and their defaults, in the same order, in
// its third ("1, 2"); a row whose defaults do not split one per flag gives each the whole cell.
std::map<std::string, DocumentedDefault> DocumentedDefaults(const std::string& doc) {
  std::map<std::string, DocumentedDefault> defaults;
  for (absl::string_view line : absl::StrSplit(doc, '\n')) {
    if (!absl::ConsumePrefix(&line, "| `--")) continue;
    const std::vector<absl::string_view> cells = absl::StrSplit(line, " | ");
    if (cells.size() < 4) continue;
    std::vector<std::string> flags;
    for (absl::string_view flag : absl::StrSplit(absl::StrCat("`--", cells[0]), ", ")) {
      if (absl::ConsumePrefix(&flag, "`--") && absl::ConsumeSuffix(&flag, "`")) {
        flags.emplace_back(flag);
      }
    }
    const std::vector<absl::string_view> values = absl::StrSplit(cells[2], ", ");
    for (size_t i = 0; i < flags.size(); ++i) {
      absl::string_view value = values.size() == flags.size() ? values[i] : cells[2];
      DocumentedDefault& documented = defaults[flags[i]];
      const std::vector<absl::string_view> local =
          absl::StrSplit(value, absl::MaxSplits(" (convoy_train: ", 1));
      documented.value = std::string(local[0]);
      if (absl::string_view rest = local.size() == 2 ? local[1] : "";
          absl::ConsumeSuffix(&rest, ")")) {
        documented.local = std::string(rest);
      }
    }
  }
  return defaults;
}

// docs/deploy.md's table of knobs gives each setting of both tables with its default, and
// convoy_train's where it differs: checked against the tables and run_defaults::kLocalRunSettings,
// so that a new row cannot be left out of it or documented with another default.
TEST_CASE("docs/deploy.md gives every setting of both tables with the table's default",
          "[run_settings]") {
  const std::map<std::string, DocumentedDefault> documented =
      DocumentedDefaults(ReadSourceFile("docs/deploy.md"));
  REQUIRE(documented.size() > 10);
  std::vector<std::pair<std::string, std::string>> settings = RunSettingValues(RunSettings{});
  const std::vector<std::pair<std::string, std::string>> local_values =
      RunSettingValues(run_defaults::kLocalRunSettings);
  const std::map<std::string, std::string> local(local_values.begin(), local_values.end());
  for (auto& value : AgentSettingValues(AgentSettings{})) settings.push_back(std::move(value));
  int local_differs = 0;
  for (const auto& [flag, value] : settings) {
    INFO("--" << flag);
    const auto row = documented.find(flag);
    REQUIRE(row != documented.end());
    CHECK(row->second.value == value);
    const auto mine = local.find(flag);
    const std::optional<std::string> local_value =
        mine != local.end() && mine->second != value ? std::optional(mine->second) : std::nullopt;
    CHECK(row->second.local == local_value);
    if (local_value.has_value()) ++local_differs;
  }
  CHECK(local_differs == 3);  // batch_update_frequency, target_update_frequency, min_epsilon.
}

TEST_CASE("A launcher passes each agent every setting of the agent's own table", "[run_settings]") {
  AgentSettings settings;
  settings.replay_memory_size = 2000;
  const std::vector<std::string> args = AgentSettingArgs(settings);
  CHECK(args.size() == AgentSettingValues(settings).size());
  CHECK(std::count(args.begin(), args.end(), "--replay_memory_size=2000") == 1);
  CHECK(std::count(args.begin(), args.end(), "--replay_ratio=8") == 1);
  CHECK(std::count(args.begin(), args.end(), "--device=auto") == 1);
  CHECK(std::count(args.begin(), args.end(), "--amp=false") == 1);
}

TEST_CASE("The defaults of every setting of both tables are in their ranges", "[run_settings]") {
  CHECK(CheckFlagRanges(RunSettingRanges(RunSettings{})).ok());
  CHECK(CheckFlagRanges(AgentSettingRanges(AgentSettings{})).ok());
}

TEST_CASE("A run setting out of its range is refused with a message naming its flag",
          "[run_settings]") {
  RunSettings server;
  server.n_step = 0;
  const absl::Status refused = CheckFlagRanges(RunSettingRanges(server));
  CHECK(refused.code() == absl::StatusCode::kInvalidArgument);
  CHECK(refused.message() == "--n_step must be in [1, 100], got 0");

  RunSettings agent;
  agent.learner_max_grad_norm = -1;
  agent.batch_size = -3;
  CHECK(CheckFlagRanges(RunSettingRanges(agent)).message() ==
        "--batch_size must be in [1, 65536], got -3\n--learner_max_grad_norm must be in [0, inf), "
        "got -1");

  AgentSettings own;
  own.replay_ratio = 0;
  own.torch_threads = -1;
  CHECK(CheckFlagRanges(AgentSettingRanges(own)).message() ==
        "--torch_threads must be in [0, 1024], got -1\n--replay_ratio must be in (0, inf), got 0");
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

  RunSettings agent;
  const std::set<std::string> none;
  RunSettingAdopter adopt(none);
  REQUIRE(AdoptRunSettings(config, &adopt, &agent).ok());
  CHECK(agent.priority_exponent == 0.4);

  RunSettings pinning;
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

  RunSettings agent;
  const std::set<std::string> none;
  RunSettingAdopter adopt(none);
  REQUIRE(AdoptRunSettings(config, &adopt, &agent).ok());
  CHECK(agent.batch_size == 64);
  CHECK(agent.gamma == 0.9);
  CHECK(agent.n_step == 5);
  CHECK_FALSE(agent.double_dqn);
  CHECK(agent.learner_max_grad_norm == 2.5);
  CHECK_FALSE(agent.prioritized);
  CHECK(agent.mirror_augmentation == server.mirror_augmentation);
  CHECK(std::count(adopt.adopted().begin(), adopt.adopted().end(), "n_step=5 (alone: 3)") == 1);

  // A server that predates the optional settings sends none of them, and a 0 for the older ones.
  v1::RunConfig old;
  old.set_gamma(0.9);
  RunSettings alone;
  alone.n_step = 7;
  RunSettingAdopter adopt_old(none);
  REQUIRE(AdoptRunSettings(old, &adopt_old, &alone).ok());
  CHECK(alone.n_step == 7);
  CHECK(alone.batch_size == RunSettings{}.batch_size);
  CHECK(alone.gamma == 0.9);
}

TEST_CASE("A pinned setting that disagrees with the server's is refused, naming both flags",
          "[run_settings]") {
  RunSettings server;
  server.learner_max_grad_norm = 2.5;
  v1::RunConfig config;
  FillRunConfig(server, &config);

  RunSettings agent;
  agent.learner_max_grad_norm = 4;
  const std::set<std::string> pinned = {"learner_max_grad_norm"};
  RunSettingAdopter adopt(pinned);
  const absl::Status refused = AdoptRunSettings(config, &adopt, &agent);
  CHECK(refused.code() == absl::StatusCode::kInvalidArgument);
  CHECK(refused.message() ==
        "--learner_max_grad_norm=4 disagrees with the parameter server's 2.5: the server owns it "
        "for the whole run. Drop --learner_max_grad_norm (the agent adopts the server's value), or "
        "start convoy_ps with --learner_max_grad_norm=4");
  CHECK(agent.learner_max_grad_norm == 4);

  // Pinned to the server's own value: nothing to refuse.
  agent.learner_max_grad_norm = 2.5;
  RunSettingAdopter agree(pinned);
  CHECK(AdoptRunSettings(config, &agree, &agent).ok());
}

}  // namespace
}  // namespace convoy
