// Scenarios: the driving tasks by name. A scenario fixes the scene (parked cars, traffic) and the
// task (a route length, a time limit); every launcher takes one --scenario and evaluation names
// the scenario it ran.
//
//   traffic  (the default) 20 parked cars, 8 stalled ones in the way, 24 moving ones; drive 500 m
//            without an infraction within 90 s; a failure costs a penalty of 10.
//   parked   40 parked cars, no traffic; the cookbook's task (stay on the road for 30 s).
//   empty    empty roads; the cookbook's task: stay on the road for 30 s.
#ifndef CONVOY_SIMULATOR_BRIDGE_TASK_SCENARIO_H_
#define CONVOY_SIMULATOR_BRIDGE_TASK_SCENARIO_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "simulator_bridge/task/driving_env.h"
#include "simulator_bridge/world/embedded_sim.h"

namespace convoy::sim {

struct Scenario {
  const char* name;
  const char* summary;
  int parked_cars;
  int stalled_cars;  // on the road centre, in the way; laid out again every episode
  int traffic_cars;
  double route_length_m;         // 0: stay on the road until the time limit
  double max_epoch_runtime_sec;  // simulation time
  double failure_penalty;        // DrivingEnvOptions::failure_penalty
};

inline constexpr char kDefaultScenario[] = "traffic";

// Every scenario, the default first.
const std::vector<Scenario>& Scenarios();
// INVALID_ARGUMENT naming --scenario and the names it takes.
absl::StatusOr<Scenario> FindScenario(absl::string_view name);
// "traffic, parked, empty".
std::string ScenarioNames();

// Its scene into `sim` (parked and moving cars) and its task into `env`.
void ApplyScenario(const Scenario& scenario, EmbeddedSimOptions* sim, DrivingEnvOptions* env);

}  // namespace convoy::sim

#endif  // CONVOY_SIMULATOR_BRIDGE_TASK_SCENARIO_H_
