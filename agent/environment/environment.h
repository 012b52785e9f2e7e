// Environment: a DrivingEnv over the simulator an agent was told to use, `embedded` (in-process
// EmbeddedSim) or `airsim://host:port` (AirSimClient to AirSim, Colosseum or convoy_sim), on the
// bundled Neighborhood map.
#ifndef CONVOY_AGENT_ENVIRONMENT_ENVIRONMENT_H_
#define CONVOY_AGENT_ENVIRONMENT_ENVIRONMENT_H_

#include <memory>
#include <ostream>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "simulator_bridge/task/driving_env.h"
#include "simulator_bridge/world/car_sim.h"

namespace convoy::agent {

// The simulators an agent can drive in.
enum class SimKind {
  kEmbedded,  // EmbeddedSim, in the agent's process.
  kAirSim,    // An AirSim-protocol server: AirSim, Colosseum or convoy_sim.
};

// The value of --sim, parsed once where the flag is read: "embedded" or "airsim://host[:port]".
struct SimTarget {
  SimKind kind = SimKind::kEmbedded;
  std::string host;  // kAirSim only.
  int port = 41451;  // kAirSim only; AirSim's own port when the value names none.
};

// Errors: INVALID_ARGUMENT naming --sim and the values it takes, or the bad port.
absl::StatusOr<SimTarget> ParseSimTarget(absl::string_view value);
// The value ParseSimTarget reads back: "embedded" or "airsim://host:port".
std::string SimTargetName(const SimTarget& target);
std::ostream& operator<<(std::ostream& out, const SimTarget& target);
// --sim as a typed flag (Abseil's flag marshalling), so that a bad value fails at start-up.
bool AbslParseFlag(absl::string_view text, SimTarget* target, std::string* error);
std::string AbslUnparseFlag(const SimTarget& target);

// A default-constructed spec is the bare simulator (empty roads, the cookbook's task);
// UseScenario sets a named one (the launchers' default is kDefaultScenario).
struct EnvironmentSpec {
  SimTarget sim;
  std::string map_dir;             // empty: the bundled Neighborhood
  std::string scenario = "empty";  // its name, for reports
  int parked_cars = 0;             // embedded only
  int stalled_cars = 0;            // embedded only
  int traffic_cars = 0;            // embedded only
  uint64_t world_seed = 0;         // parked-car placement and traffic
  sim::DrivingEnvOptions env;
};

// The scenario `name` (simulator_bridge/task/scenario.h) into `spec`: its name, scene and task.
// INVALID_ARGUMENT for an unknown name, naming the known ones; `spec` is then unchanged.
absl::Status UseScenario(absl::string_view name, EnvironmentSpec* spec);

struct Environment {
  std::unique_ptr<sim::CarSim> sim;  // null when the DrivingEnv owns an EmbeddedSim
  std::unique_ptr<sim::DrivingEnv> env;
};

// Errors: UNAVAILABLE when an AirSim server cannot be reached.
absl::StatusOr<std::unique_ptr<Environment>> MakeEnvironment(const EnvironmentSpec& spec);

}  // namespace convoy::agent

#endif  // CONVOY_AGENT_ENVIRONMENT_ENVIRONMENT_H_
