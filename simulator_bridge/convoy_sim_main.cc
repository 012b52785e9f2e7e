// convoy_sim: the embedded driving simulator served over AirSim's RPC protocol, so AirSim clients
// (AirSim's Python package, convoy_agent with --sim=airsim) drive it as they would AirSim.
#include <glog/logging.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/metrics/prometheus_endpoint.h"
#include "common/settings/flag_ranges.h"
#include "common/settings/process_settings.h"
#include "common/support/init.h"
#include "common/support/settings_table.h"
#include "simulator_bridge/airsim/airsim_server.h"
#include "simulator_bridge/task/scenario.h"
#include "simulator_bridge/world/road_map.h"
#include "simulator_bridge/world/world.h"

namespace {
// The defaults every flag below shows: AirSimServerOptions', written once there.
const convoy::sim::AirSimServerOptions& Defaults() {
  static const convoy::sim::AirSimServerOptions* const defaults =
      new convoy::sim::AirSimServerOptions();
  return *defaults;
}
}  // namespace

// convoy_sim's own flags, a row each (common/support/settings_table.h); the settings other binaries
// take too are written through common/settings/process_settings.h.
#define CONVOY_SIM_MAIN_SETTINGS(X)                                                              \
  CONVOY_PROCESS_SETTING(X, port, Defaults().port,                                               \
                         "TCP port (AirSim's default 41451); 0 picks a free one and prints it.") \
  CONVOY_PROCESS_SETTING(                                                                        \
      X, bind, Defaults().bind_address,                                                          \
      "Address to listen on. The protocol has no authentication: keep it on loopback unless "    \
      "the network is trusted.")                                                                 \
  CONVOY_PROCESS_SETTING(                                                                        \
      X, map_dir, "",                                                                            \
      "Directory with road_lines.txt and reward_points.txt (default: the bundled Neighborhood, " \
      "or $CONVOY_MAP_DIR).")                                                                    \
  CONVOY_PROCESS_SETTING(X, seed, Defaults().sim.seed,                                           \
                         "Seed of the parked cars' places and the traffic.")                     \
  CONVOY_PROCESS_SETTING(                                                                        \
      X, scenario, convoy::sim::kDefaultScenario,                                                \
      absl::StrCat("The scene: ", convoy::sim::ScenarioNames(),                                  \
                   " (simulator_bridge/task/scenario.h): its parked, stalled and moving cars. "  \
                   "The task (route "                                                            \
                   "length, time limit) is the client's: give the agent the same --scenario."))  \
  X(std::string, clock,                                                                          \
    Defaults().clock == convoy::sim::SimClockMode::kRealTime ? "realtime" : "lockstep",          \
    "realtime: the simulation clock follows the wall clock unless paused (as AirSim). "          \
    "lockstep: time advances only on simContinueForTime / simContinueForFrames.")                \
  X(double, step_seconds, Defaults().sim.step_seconds, "Fixed physics step, seconds.")           \
  X(std::string, vehicles, absl::StrJoin(Defaults().vehicle_names, ","),                         \
    "Comma-separated vehicle names, one car each.")                                              \
  X(int, camera_width, Defaults().sim.camera.width, "Scene camera width, pixels.")               \
  X(int, camera_height, Defaults().sim.camera.height, "Scene camera height, pixels.")            \
  X(double, camera_fov_deg, Defaults().sim.camera.fov_deg,                                       \
    "Scene camera horizontal field of view, degrees.")                                           \
  X(double, camera_height_m, -Defaults().sim.camera.z_m,                                         \
    "Camera height above the ground, metres.")                                                   \
  X(double, camera_pitch_deg, Defaults().sim.camera.pitch_deg,                                   \
    "Camera pitch, degrees, positive up.")                                                       \
  X(std::string, dump_frames, "",                                                                \
    "Directory to write every served scene image to as PNG (<vehicle>_<n>.png).")                \
  X(int, max_connections, Defaults().max_connections,                                            \
    "Connections served at once; more are refused.")                                             \
  X(uint64_t, max_message_bytes, Defaults().max_message_bytes, "Largest request accepted, bytes.")
CONVOY_SIM_MAIN_SETTINGS(CONVOY_SETTING_FLAG)

// The settings this binary shares with others, as flags (common/support/settings_table.h).
CONVOY_SETTINGS_FLAGS(CONVOY_METRICS_ENDPOINT_SETTINGS, convoy::MetricsEndpointSettings,
                      MetricsEndpointSettingsFromFlags)

namespace {

// Every numeric flag but --seed, which takes any value.
bool FlagsAreInRange() {
  return convoy::FlagsInRange(
      "convoy_sim",
      {convoy::IntRange("port", absl::GetFlag(FLAGS_port), 0, 65535),
       convoy::RealRange("step_seconds", absl::GetFlag(FLAGS_step_seconds), 0, 10,
                         convoy::Ends::kOpenMin),
       convoy::IntRange("camera_width", absl::GetFlag(FLAGS_camera_width), 1, 8192),
       convoy::IntRange("camera_height", absl::GetFlag(FLAGS_camera_height), 1, 8192),
       convoy::RealRange("camera_fov_deg", absl::GetFlag(FLAGS_camera_fov_deg), 0, 180,
                         convoy::Ends::kOpen),
       convoy::RealRange("camera_height_m", absl::GetFlag(FLAGS_camera_height_m), -100, 100),
       convoy::RealRange("camera_pitch_deg", absl::GetFlag(FLAGS_camera_pitch_deg), -90, 90),
       convoy::IntRange("max_connections", absl::GetFlag(FLAGS_max_connections), 1, 65536),
       convoy::UintRange("max_message_bytes", absl::GetFlag(FLAGS_max_message_bytes), 1,
                         uint64_t{1} << 32)});
}

// The world of --map_dir (or the bundled map). Errors: the map's.
absl::StatusOr<std::shared_ptr<const convoy::sim::World>> LoadWorld(std::string* map_dir) {
  *map_dir = absl::GetFlag(FLAGS_map_dir);
  if (map_dir->empty()) {
    absl::StatusOr<std::string> found = convoy::sim::FindDefaultMapDir();
    if (!found.ok()) return found.status();
    *map_dir = *found;
  }
  absl::StatusOr<convoy::sim::RoadMap> map = convoy::sim::RoadMap::Load(*map_dir);
  if (!map.ok()) return map.status();
  return convoy::sim::World::Create(*std::move(map));
}

// The server's options from the flags. Errors: INVALID_ARGUMENT naming --scenario or --clock.
absl::Status OptionsFromFlags(std::shared_ptr<const convoy::sim::World> world,
                              convoy::sim::AirSimServerOptions* options) {
  options->sim.world = std::move(world);
  options->sim.seed = absl::GetFlag(FLAGS_seed);
  absl::StatusOr<convoy::sim::Scenario> scenario =
      convoy::sim::FindScenario(absl::GetFlag(FLAGS_scenario));
  if (!scenario.ok()) return scenario.status();
  convoy::sim::ApplyScenario(*scenario, &options->sim, nullptr);
  options->sim.step_seconds = absl::GetFlag(FLAGS_step_seconds);
  options->sim.camera.width = absl::GetFlag(FLAGS_camera_width);
  options->sim.camera.height = absl::GetFlag(FLAGS_camera_height);
  options->sim.camera.fov_deg = absl::GetFlag(FLAGS_camera_fov_deg);
  options->sim.camera.z_m = -absl::GetFlag(FLAGS_camera_height_m);
  options->sim.camera.pitch_deg = absl::GetFlag(FLAGS_camera_pitch_deg);
  options->vehicle_names = absl::StrSplit(absl::GetFlag(FLAGS_vehicles), ',', absl::SkipEmpty());
  options->bind_address = absl::GetFlag(FLAGS_bind);
  options->port = absl::GetFlag(FLAGS_port);
  options->dump_frames_dir = absl::GetFlag(FLAGS_dump_frames);
  options->max_connections = absl::GetFlag(FLAGS_max_connections);
  options->max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  const std::string clock = absl::GetFlag(FLAGS_clock);
  if (clock == "realtime") {
    options->clock = convoy::sim::SimClockMode::kRealTime;
  } else if (clock == "lockstep") {
    options->clock = convoy::sim::SimClockMode::kLockStep;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--clock must be realtime or lockstep, not '", clock, "'"));
  }
  return absl::OkStatus();
}

// The server's counters, each a row of common/metrics/metric_table.h.
void CollectMetrics(const convoy::sim::AirSimServer::Stats& stats, convoy::MetricFamilies& out) {
  namespace metric = convoy::metric;
  for (const auto& [vehicle, steps] : stats.steps_by_vehicle) {
    out.Set(metric::kSimSteps, static_cast<double>(steps), {{"vehicle", vehicle}});
  }
  out.Set(metric::kSimRequests, static_cast<double>(stats.requests));
  out.Set(metric::kSimConnections, static_cast<double>(stats.connections_accepted),
          {{"result", "accepted"}});
  out.Set(metric::kSimConnections, static_cast<double>(stats.connections_refused),
          {{"result", "refused"}});
  out.Set(metric::kSimConnections, static_cast<double>(stats.connections_closed_for_errors),
          {{"result", "closed_for_errors"}});
}

}  // namespace

int main(int argc, char** argv) {
  convoy::InitProcess(
      argc, argv,
      "serves EmbeddedSim cars over the AirSim RPC protocol (msgpack-rpc on TCP).\n"
      "  convoy_sim --port=41451 --clock=lockstep --dump_frames=/tmp/frames\n"
      "Then, from Python: import airsim; c = airsim.CarClient(); c.confirmConnection()");
  if (!FlagsAreInRange()) return convoy::kExitUsage;
  // SIGINT/SIGTERM are taken synchronously below, not by a handler; block them before any thread.
  convoy::BlockTerminationSignals();

  std::string map_dir;
  absl::StatusOr<std::shared_ptr<const convoy::sim::World>> world = LoadWorld(&map_dir);
  if (!world.ok()) {
    LOG(ERROR) << world.status();
    return 1;
  }
  convoy::sim::AirSimServerOptions options;
  if (absl::Status s = OptionsFromFlags(*std::move(world), &options); !s.ok()) {
    std::fprintf(stderr, "convoy_sim: %s\n", std::string(s.message()).c_str());
    return convoy::kExitUsage;
  }
  absl::StatusOr<std::unique_ptr<convoy::sim::AirSimServer>> server =
      convoy::sim::AirSimServer::Start(options);
  if (!server.ok()) {
    LOG(ERROR) << server.status();
    return 1;
  }
  convoy::sim::AirSimServer* const served = server->get();
  absl::StatusOr<std::unique_ptr<convoy::PrometheusEndpoint>> metrics =
      convoy::PrometheusEndpoint::Serve(
          MetricsEndpointSettingsFromFlags(),
          {std::make_shared<convoy::CollectedMetrics>(
              [served](convoy::MetricFamilies& out) { CollectMetrics(served->stats(), out); })});
  if (!metrics.ok()) {
    LOG(ERROR) << metrics.status();
    return metrics.status().code() == absl::StatusCode::kInvalidArgument ? convoy::kExitUsage : 1;
  }
  LOG(INFO) << "convoy_sim serving " << options.vehicle_names.size() << " car(s) on the map "
            << map_dir << ", clock " << absl::GetFlag(FLAGS_clock) << ", on "
            << options.bind_address << ":" << (*server)->port();
  // One machine-readable line on stdout, for scripts and tests that start with --port=0.
  std::printf("convoy_sim listening on %s:%d\n", options.bind_address.c_str(), (*server)->port());
  std::fflush(stdout);

  const int signal_number = convoy::WaitForTerminationSignal();
  LOG(INFO) << "signal " << signal_number << ": shutting down";
  metrics->reset();  // No scrape reads the server once it stops.
  (*server)->Stop();
  const convoy::sim::AirSimServer::Stats stats = (*server)->stats();
  LOG(INFO) << "served " << stats.requests << " requests on " << stats.connections_accepted
            << " connections (" << stats.connections_closed_for_errors << " closed for errors, "
            << stats.connections_refused << " refused)";
  return 0;
}
