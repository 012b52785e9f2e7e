#include "agent/environment/scenario_flags.h"

#include <optional>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/support/status_macros.h"
#include "simulator_bridge/task/scenario.h"

ABSL_FLAG(std::string, scenario, convoy::sim::kDefaultScenario,
          absl::StrCat("The driving task: ", convoy::sim::ScenarioNames(),
                       " (simulator_bridge/task/scenario.h; the scene applies to the embedded "
                       "simulator, convoy_sim takes its own --scenario)."));
ABSL_FLAG(std::optional<double>, max_epoch_runtime_sec, std::nullopt,
          "Episode time limit, simulation seconds; default: the scenario's.");

namespace convoy {

absl::Status ScenarioFromFlags(EnvironmentSpec* spec) {
  const std::optional<double> limit = absl::GetFlag(FLAGS_max_epoch_runtime_sec);
  if (limit.has_value() && !(*limit > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_epoch_runtime_sec must be in (0, inf), got ", *limit));
  }
  CONVOY_RETURN_IF_ERROR(UseScenario(absl::GetFlag(FLAGS_scenario), spec));
  if (limit.has_value()) spec->env.max_epoch_runtime_sec = *limit;
  return absl::OkStatus();
}

std::string ScenarioFlag() { return absl::GetFlag(FLAGS_scenario); }

std::optional<double> EpisodeTimeLimitFlag() { return absl::GetFlag(FLAGS_max_epoch_runtime_sec); }

}  // namespace convoy
