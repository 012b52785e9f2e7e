#include "agent/environment.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "simulator_bridge/airsim_client.h"
#include "simulator_bridge/embedded_sim.h"
#include "simulator_bridge/road_map.h"
#include "simulator_bridge/world.h"

namespace convoy {

absl::StatusOr<std::unique_ptr<Environment>> MakeEnvironment(const EnvironmentSpec& spec) {
  std::string map_dir = spec.map_dir;
  if (map_dir.empty()) {
    absl::StatusOr<std::string> found = FindDefaultMapDir();
    if (!found.ok()) return found.status();
    map_dir = *found;
  }
  absl::StatusOr<RoadMap> map = RoadMap::Load(map_dir);
  if (!map.ok()) return map.status();
  auto environment = std::make_unique<Environment>();
  if (spec.sim == "embedded") {
    absl::StatusOr<std::shared_ptr<const World>> world = World::Create(*map);
    if (!world.ok()) return world.status();
    EmbeddedSimOptions options;
    options.world = *world;
    options.num_parked_cars = spec.parked_cars;
    options.seed = spec.world_seed;
    absl::StatusOr<std::unique_ptr<DrivingEnv>> env = DrivingEnv::CreateEmbedded(options, spec.env);
    if (!env.ok()) return env.status();
    environment->env = *std::move(env);
    return environment;
  }
  absl::string_view address = spec.sim;
  if (!absl::ConsumePrefix(&address, "airsim://")) {
    return absl::InvalidArgumentError(
        absl::StrCat("--sim must be 'embedded' or 'airsim://host:port', got '", spec.sim, "'"));
  }
  AirSimClientOptions options;
  const size_t colon = address.rfind(':');
  options.host = std::string(address.substr(0, colon));
  if (colon != absl::string_view::npos &&
      !absl::SimpleAtoi(address.substr(colon + 1), &options.port)) {
    return absl::InvalidArgumentError(absl::StrCat("bad port in --sim=", spec.sim));
  }
  absl::StatusOr<std::unique_ptr<AirSimClient>> client = AirSimClient::Connect(options);
  if (!client.ok()) return client.status();
  environment->sim = *std::move(client);
  absl::StatusOr<std::unique_ptr<DrivingEnv>> env =
      DrivingEnv::Create(environment->sim.get(), *std::move(map), spec.env);
  if (!env.ok()) return env.status();
  environment->env = *std::move(env);
  return environment;
}

}  // namespace convoy
