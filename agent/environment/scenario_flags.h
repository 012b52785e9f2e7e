// The flags that choose the driving task, shared by every launcher that drives or evaluates a car
// (convoy_agent, convoy_eval, convoy_train, convoy_bench_learn): --scenario, a name from
// simulator_bridge/task/scenario.h, and --max_epoch_runtime_sec, which overrides the scenario's time
// limit when given.
#ifndef CONVOY_AGENT_ENVIRONMENT_SCENARIO_FLAGS_H_
#define CONVOY_AGENT_ENVIRONMENT_SCENARIO_FLAGS_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "agent/environment/environment.h"

namespace convoy {

// The scenario (scene and task) into `spec`, then the time-limit override. INVALID_ARGUMENT for
// an unknown --scenario (naming the known ones) or a --max_epoch_runtime_sec that is not positive.
absl::Status ScenarioFromFlags(EnvironmentSpec* spec);

// The flags' values, for a launcher to hand on to the agents it starts.
std::string ScenarioFlag();
std::optional<double> EpisodeTimeLimitFlag();

}  // namespace convoy

#endif  // CONVOY_AGENT_ENVIRONMENT_SCENARIO_FLAGS_H_
