// The run settings' flags of a launcher (convoy_train, convoy_bench_learn), which passes them on to
// convoy_ps: the table of common/run_settings.h, read as a launcher reads it.
#ifndef CONVOY_COMMON_LAUNCHER_RUN_SETTINGS_H_
#define CONVOY_COMMON_LAUNCHER_RUN_SETTINGS_H_

#include "common/run_settings.h"

// A launcher's flag of a setting (convoy_train, convoy_bench_learn), passed on to convoy_ps:
// convoy_ps's name, the agent's type (so that a negative value reads as out of range, not as a
// parse error).
#define CONVOY_LAUNCHER_RUN_SETTING_FLAG(type, agent_type, name, agent_name, def, min, max, ends, \
                                         presence, help)                                          \
  ABSL_FLAG(agent_type, name, def, help " Passed to convoy_ps, which hands it to the agents.");

// Inside a function of a launcher: appends each setting's range, as its flag has it, to
// `std::vector<convoy::FlagRange> ranges`.
#define CONVOY_LAUNCHER_RUN_SETTING_RANGE(type, agent_type, name, agent_name, def, min, max, ends, \
                                          presence, help)                                          \
  ranges.push_back(                                                                                \
      ::convoy::SettingRange(#name, absl::GetFlag(FLAGS_##name), min, max, ::convoy::Ends::ends));

// Inside a function of a launcher, after the ranges passed: reads each flag into
// `convoy::RunSettings settings`.
#define CONVOY_LAUNCHER_RUN_SETTING_READ(type, agent_type, name, agent_name, def, min, max, ends, \
                                         presence, help)                                          \
  settings.name = static_cast<type>(absl::GetFlag(FLAGS_##name));

#endif  // CONVOY_COMMON_LAUNCHER_RUN_SETTINGS_H_
