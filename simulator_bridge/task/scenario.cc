#include "simulator_bridge/task/scenario.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace convoy::sim {

const std::vector<Scenario>& Scenarios() {
  static const auto* const scenarios = new std::vector<Scenario>{
      {"traffic",
       "20 parked, 8 stalled and 24 moving cars; drive 500 m without an infraction within 90 s", 20,
       8, 24, 500.0, 90.0, 10.0},
      {"parked", "40 parked cars; stay on the road for 30 s", 40, 0, 0, 0.0, 30.0, 0.0},
      {"empty", "empty roads; stay on the road for 30 s (the cookbook's task)", 0, 0, 0, 0.0, 30.0,
       0.0},
  };
  return *scenarios;
}

std::string ScenarioNames() {
  std::string names;
  for (const Scenario& s : Scenarios()) absl::StrAppend(&names, names.empty() ? "" : ", ", s.name);
  return names;
}

absl::StatusOr<Scenario> FindScenario(absl::string_view name) {
  for (const Scenario& s : Scenarios()) {
    if (name == s.name) return s;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--scenario: unknown scenario '", name, "'; known: ", ScenarioNames()));
}

void ApplyScenario(const Scenario& scenario, EmbeddedSimOptions* sim, DrivingEnvOptions* env) {
  if (sim != nullptr) {
    sim->num_parked_cars = scenario.parked_cars;
    sim->num_stalled_cars = scenario.stalled_cars;
    sim->traffic.cars = scenario.traffic_cars;
  }
  if (env != nullptr) {
    env->route_length_m = scenario.route_length_m;
    env->max_epoch_runtime_sec = scenario.max_epoch_runtime_sec;
    env->failure_penalty = scenario.failure_penalty;
  }
}

}  // namespace convoy::sim
