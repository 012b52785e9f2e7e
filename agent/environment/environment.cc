#include "agent/environment/environment.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/support/status_macros.h"
#include "simulator_bridge/airsim/airsim_client.h"
#include "simulator_bridge/task/scenario.h"
#include "simulator_bridge/world/embedded_sim.h"
#include "simulator_bridge/world/road_map.h"
#include "simulator_bridge/world/world.h"

namespace convoy::agent {

absl::StatusOr<SimTarget> ParseSimTarget(absl::string_view value) {
  SimTarget target;
  if (value == "embedded") return target;
  absl::string_view address = value;
  if (!absl::ConsumePrefix(&address, "airsim://")) {
    return absl::InvalidArgumentError(
        absl::StrCat("--sim must be 'embedded' or 'airsim://host:port', got '", value, "'"));
  }
  target.kind = SimKind::kAirSim;
  const size_t colon = address.rfind(':');
  target.host = std::string(address.substr(0, colon));
  if (colon != absl::string_view::npos &&
      !absl::SimpleAtoi(address.substr(colon + 1), &target.port)) {
    return absl::InvalidArgumentError(absl::StrCat("bad port in --sim=", value));
  }
  return target;
}

std::string SimTargetName(const SimTarget& target) {
  if (target.kind == SimKind::kEmbedded) return "embedded";
  return absl::StrCat("airsim://", target.host, ":", target.port);
}

std::ostream& operator<<(std::ostream& out, const SimTarget& target) {
  return out << SimTargetName(target);
}

bool AbslParseFlag(absl::string_view text, SimTarget* target, std::string* error) {
  absl::StatusOr<SimTarget> parsed = ParseSimTarget(text);
  if (!parsed.ok()) {
    *error = std::string(parsed.status().message());
    return false;
  }
  *target = *std::move(parsed);
  return true;
}

std::string AbslUnparseFlag(const SimTarget& target) { return SimTargetName(target); }

absl::Status UseScenario(absl::string_view name, EnvironmentSpec* spec) {
  CONVOY_ASSIGN_OR_RETURN(const sim::Scenario scenario, sim::FindScenario(name));
  sim::ApplyScenario(scenario, nullptr, &spec->env);
  spec->scenario = scenario.name;
  spec->parked_cars = scenario.parked_cars;
  spec->stalled_cars = scenario.stalled_cars;
  spec->traffic_cars = scenario.traffic_cars;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Environment>> MakeEnvironment(const EnvironmentSpec& spec) {
  std::string map_dir = spec.map_dir;
  if (map_dir.empty()) {
    CONVOY_ASSIGN_OR_RETURN(map_dir, sim::FindDefaultMapDir());
  }
  CONVOY_ASSIGN_OR_RETURN(sim::RoadMap map, sim::RoadMap::Load(map_dir));
  auto environment = std::make_unique<Environment>();
  if (spec.sim.kind == SimKind::kEmbedded) {
    sim::EmbeddedSimOptions options;
    CONVOY_ASSIGN_OR_RETURN(options.world, sim::World::Create(map));
    options.num_parked_cars = spec.parked_cars;
    options.num_stalled_cars = spec.stalled_cars;
    options.traffic.cars = spec.traffic_cars;
    options.seed = spec.world_seed;
    CONVOY_ASSIGN_OR_RETURN(environment->env, sim::DrivingEnv::CreateEmbedded(options, spec.env));
    return environment;
  }
  sim::AirSimClientOptions options;
  options.host = spec.sim.host;
  options.port = spec.sim.port;
  CONVOY_ASSIGN_OR_RETURN(environment->sim, sim::AirSimClient::Connect(options));
  CONVOY_ASSIGN_OR_RETURN(
      environment->env, sim::DrivingEnv::Create(environment->sim.get(), std::move(map), spec.env));
  return environment;
}

}  // namespace convoy::agent
