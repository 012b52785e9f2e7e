// Environment: a DrivingEnv over the simulator an agent was told to use, `embedded` (in-process
// EmbeddedSim) or `airsim://host:port` (AirSimClient to AirSim, Colosseum or convoy_sim), on the
// bundled Neighborhood map.
#ifndef CONVOY_AGENT_ENVIRONMENT_H_
#define CONVOY_AGENT_ENVIRONMENT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "simulator_bridge/car_sim.h"
#include "simulator_bridge/driving_env.h"

namespace convoy {

struct EnvironmentSpec {
  std::string sim = "embedded";  // or "airsim://host:port"
  std::string map_dir;           // empty: the bundled Neighborhood
  int parked_cars = 0;           // embedded only
  uint64_t world_seed = 0;       // parked-car placement
  DrivingEnvOptions env;
};

struct Environment {
  std::unique_ptr<CarSim> sim;  // null when the DrivingEnv owns an EmbeddedSim
  std::unique_ptr<DrivingEnv> env;
};

// Errors: INVALID_ARGUMENT for an unknown --sim; UNAVAILABLE when an AirSim server cannot be
// reached.
absl::StatusOr<std::unique_ptr<Environment>> MakeEnvironment(const EnvironmentSpec& spec);

}  // namespace convoy

#endif  // CONVOY_AGENT_ENVIRONMENT_H_
