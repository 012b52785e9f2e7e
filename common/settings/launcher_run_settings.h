// The run settings' flags of a launcher (convoy_train, convoy_bench_learn), which passes them on to
// convoy_ps, and each agent's own settings, which it passes on to the agents: the tables of
// common/settings/run_settings.h and common/settings/agent_settings.h, read as a launcher reads them.
#ifndef CONVOY_COMMON_SETTINGS_LAUNCHER_RUN_SETTINGS_H_
#define CONVOY_COMMON_SETTINGS_LAUNCHER_RUN_SETTINGS_H_

#include "common/settings/agent_settings.h"
#include "common/settings/run_defaults.h"
#include "common/settings/run_settings.h"

// A launcher's flag of a setting (convoy_train, convoy_bench_learn), passed on to convoy_ps: the
// name and type convoy_ps's flag has, and a run on one machine's default
// (run_defaults::kLocalRunSettings).
#define CONVOY_LAUNCHER_RUN_SETTING_FLAG(type, name, def, min, max, ends, presence, help) \
  ABSL_FLAG(type, name, ::convoy::run_defaults::kLocalRunSettings.name,                   \
            help " Passed to convoy_ps, which hands it to the agents.");

// A launcher's flag of an agent's own setting (common/settings/agent_settings.h), passed on to each agent:
// the name and type convoy_agent's flag has.
#define CONVOY_LAUNCHER_AGENT_SETTING_FLAG(type, name, def, min, max, ends, help) \
  ABSL_FLAG(type, name, def, help " Passed to each agent.");

// Defines, where a launcher expands it (after both tables' flags), RunSettingsFromFlags() and
// AgentSettingsFromFlags(): the two tables' settings as its flags give them. Their ranges are
// SettingRanges of these.
#define CONVOY_LAUNCHER_SETTINGS_FROM_FLAGS() \
  CONVOY_RUN_SETTINGS_FROM_FLAGS()            \
  CONVOY_AGENT_SETTINGS_FROM_FLAGS()

#endif  // CONVOY_COMMON_SETTINGS_LAUNCHER_RUN_SETTINGS_H_
