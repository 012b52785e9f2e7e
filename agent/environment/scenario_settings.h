// The settings that choose the driving task, shared by every binary that drives or evaluates a car
// (convoy_agent, convoy_eval, convoy_train, convoy_bench_learn): scenario, a name from
// simulator_bridge/task/scenario.h, and max_epoch_runtime_sec, which overrides the scenario's time
// limit when given. Each such binary declares them as flags by expanding
// CONVOY_SETTINGS_FLAGS(CONVOY_SCENARIO_SETTINGS, ScenarioSettings, ...)
// (common/support/settings_table.h). convoy_sim's --scenario, the scene alone, is the same setting:
// both are written through common/settings/process_settings.h.
#ifndef CONVOY_AGENT_ENVIRONMENT_SCENARIO_SETTINGS_H_
#define CONVOY_AGENT_ENVIRONMENT_SCENARIO_SETTINGS_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "agent/environment/environment.h"
#include "common/settings/process_settings.h"
#include "common/support/settings_table.h"
#include "simulator_bridge/task/scenario.h"

#define CONVOY_SCENARIO_SETTINGS(X)                                                         \
  CONVOY_PROCESS_SETTING(                                                                   \
      X, scenario, ::convoy::sim::kDefaultScenario,                                         \
      absl::StrCat("The driving task: ", ::convoy::sim::ScenarioNames(),                    \
                   " (simulator_bridge/task/scenario.h; the scene applies to the embedded " \
                   "simulator, convoy_sim takes its own --scenario)."))                     \
  X(std::optional<double>, max_epoch_runtime_sec, std::nullopt,                             \
    "Episode time limit, simulation seconds; default: the scenario's.")

namespace convoy::agent {

struct ScenarioSettings {
  CONVOY_SCENARIO_SETTINGS(CONVOY_SETTING_MEMBER)
};

// The scenario (scene and task) into `spec`, then the time-limit override. INVALID_ARGUMENT for
// an unknown scenario (naming the known ones) or a max_epoch_runtime_sec that is not positive.
absl::Status UseScenarioSettings(const ScenarioSettings& settings, EnvironmentSpec* spec);

}  // namespace convoy::agent

#endif  // CONVOY_AGENT_ENVIRONMENT_SCENARIO_SETTINGS_H_
