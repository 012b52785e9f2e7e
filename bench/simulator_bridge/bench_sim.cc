// convoy_bench_sim: how fast the embedded simulator runs, in-process and over the AirSim protocol.
// Prints a table, then RESULT key=value lines. Not a test: numbers depend on the machine.
#include <glog/logging.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/bench_support.h"
#include "common/settings/flag_ranges.h"
#include "common/support/init.h"
#include "simulator_bridge/airsim/airsim_client.h"
#include "simulator_bridge/airsim/airsim_server.h"
#include "simulator_bridge/task/driving_env.h"
#include "simulator_bridge/task/scenario.h"
#include "simulator_bridge/world/embedded_sim.h"
#include "simulator_bridge/world/png.h"
#include "simulator_bridge/world/world.h"

ABSL_FLAG(double, seconds, 2.0, "Wall-clock seconds per measurement.");
ABSL_FLAG(uint64_t, seed, 1, "Seed for starts and actions.");
ABSL_FLAG(double, airsim_steps_per_sec, 20.0,
          "Reference: steps per second of one AirSim car in real time (the ratio's denominator).");
ABSL_FLAG(int, threads, 0,
          "Also measure this many DrivingEnvs (crop) stepping on their own threads, sharing one "
          "World; 0 = one per hardware thread.");
ABSL_FLAG(bool, loopback, true, "Also measure DrivingEnv over AirSimClient to convoy_sim.");
ABSL_FLAG(bool, loopback_only, false,
          "Measure only DrivingEnv over AirSimClient to convoy_sim (and its round trips), skipping "
          "the in-process measurements.");
ABSL_FLAG(std::string, dump_frames, "",
          "If set, also drive one episode with a lane-keeping controller and write every 10th "
          "scene frame there as PNG (frame_NNN.png), to look at what the agent sees.");
ABSL_FLAG(int, dump_parked_cars, 40, "Parked cars in the --dump_frames episode.");

namespace convoy::bench {
namespace {

using Clock = BenchClock;

// CPU time of the calling thread: a rate per CPU-second is the rate on one whole core, whatever
// else the machine is running.
double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double ProcessCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Work counted over a wall-clock and a thread-CPU interval.
class Meter {
 public:
  Meter() : wall_(Clock::now()), cpu_(ThreadCpuSeconds()) {}
  double wall() const { return Since(wall_); }
  double cpu() const { return ThreadCpuSeconds() - cpu_; }

 private:
  Clock::time_point wall_;
  double cpu_;
};

// Mostly straight with some steering, from a fixed-seed generator.
int NextAction(uint64_t* state, int num_actions) {
  *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
  const uint32_t r = static_cast<uint32_t>(*state >> 33);
  return (r % 10) < 6 ? num_actions / 2 : static_cast<int>(r % num_actions);
}

struct EnvRate {
  double steps_per_sec = 0;      // wall clock
  double steps_per_cpu_sec = 0;  // per CPU-second of the stepping thread
  int64_t steps = 0;
  int64_t episodes = 0;
};

EnvRate MeasureEnv(sim::DrivingEnv* env, double seconds, uint64_t seed) {
  std::vector<uint8_t> obs(env->observation_size());
  uint64_t action_state = seed;
  EnvRate rate;
  uint64_t episode_seed = seed;
  BENCH_CHECK_OK(env->Reset(episode_seed++, obs.data()).status());
  const Meter meter;
  while (true) {
    for (int i = 0; i < 64; ++i) {
      absl::StatusOr<sim::StepResult> r =
          env->Step(NextAction(&action_state, env->num_actions()), obs.data());
      BENCH_CHECK_OK(r.status());
      ++rate.steps;
      if (r->done) {
        ++rate.episodes;
        BENCH_CHECK_OK(env->Reset(episode_seed++, obs.data()).status());
      }
    }
    if (meter.wall() >= seconds) break;
  }
  rate.steps_per_sec = rate.steps / meter.wall();
  rate.steps_per_cpu_sec = rate.steps / meter.cpu();
  return rate;
}

// Wall-clock microseconds per call of each kind a DrivingEnv step makes, one kind at a time.
struct CallTimes {
  double ping_us = 0;
  double set_controls_us = 0;
  double continue_us = 0;  // ContinueForTime(control period): simContinueForTime + simIsPaused
  double state_us = 0;
  double collision_us = 0;
  double images_us = 0;
};

CallTimes MeasureCalls(sim::AirSimClient* client, double control_period_sec) {
  constexpr int kCalls = 2000;
  auto time = [](const std::function<absl::Status()>& call) {
    const Clock::time_point start = Clock::now();
    for (int i = 0; i < kCalls; ++i) BENCH_CHECK_OK(call());
    return Since(start) / kCalls * 1e6;
  };
  CallTimes t;
  sim::CarControls controls;
  controls.throttle = 0.2f;
  std::vector<sim::ImageRequest> requests(1);
  std::vector<sim::ImageResponse> responses;
  t.ping_us = time([&] { return client->Ping().status(); });
  t.set_controls_us = time([&] { return client->SetControls(controls); });
  t.continue_us = time([&] { return client->ContinueForTime(absl::Seconds(control_period_sec)); });
  t.state_us = time([&] { return client->GetState().status(); });
  t.collision_us = time([&] { return client->GetCollisionInfo().status(); });
  t.images_us = time([&] { return client->GetImages(requests, &responses); });
  return t;
}

struct LoopbackRate {
  EnvRate env;
  double requests_per_step = 0;     // msgpack-rpc requests the server answered, resets included
  double round_trips_per_step = 0;  // writes by the client, each waiting for its answers
  bool pipelined = false;           // the client pipelined Advance (the server is in order)
  double steps_per_process_cpu_sec = 0;  // client and server CPU together
  CallTimes calls;
};

// DrivingEnv (crop) over AirSimClient to an in-process convoy_sim in lock-step mode on 127.0.0.1.
LoopbackRate MeasureLoopback(const sim::EmbeddedSimOptions& sim_options,
                             const sim::DrivingEnvOptions& env_options, double seconds,
                             uint64_t seed) {
  sim::AirSimServerOptions server_options;
  server_options.sim = sim_options;
  server_options.port = 0;
  server_options.clock = sim::SimClockMode::kLockStep;
  absl::StatusOr<std::unique_ptr<sim::AirSimServer>> server =
      sim::AirSimServer::Start(server_options);
  BENCH_CHECK_OK(server.status());
  sim::AirSimClientOptions client_options;
  client_options.port = (*server)->port();
  absl::StatusOr<std::unique_ptr<sim::AirSimClient>> client =
      sim::AirSimClient::Connect(client_options);
  BENCH_CHECK_OK(client.status());
  absl::StatusOr<std::unique_ptr<sim::DrivingEnv>> remote_env =
      sim::DrivingEnv::Create(client->get(), sim_options.world->map(), env_options);
  BENCH_CHECK_OK(remote_env.status());
  const int64_t requests_before = (*server)->stats().requests;
  const int64_t round_trips_before = (*client)->round_trips();
  LoopbackRate rate;
  const double process_cpu_before = ProcessCpuSeconds();
  rate.env = MeasureEnv(remote_env->get(), seconds, seed);
  // Client and server threads are both in this process: the CPU of a step at both ends.
  rate.steps_per_process_cpu_sec = rate.env.steps / (ProcessCpuSeconds() - process_cpu_before);
  rate.requests_per_step =
      static_cast<double>((*server)->stats().requests - requests_before) / rate.env.steps;
  rate.round_trips_per_step =
      static_cast<double>((*client)->round_trips() - round_trips_before) / rate.env.steps;
  rate.pipelined = (*client)->server_answers_in_order();
  rate.calls = MeasureCalls(client->get(), env_options.control_period_sec);
  (*server)->Stop();
  return rate;
}

void PrintLoopbackCallTimes(const CallTimes& t) {
  std::printf(
      "loopback wall-clock us per call, one kind at a time: ping %.1f, setCarControls %.1f, "
      "ContinueForTime %.1f, getCarState %.1f, simGetCollisionInfo %.1f, simGetImages "
      "(256x144 scene) %.1f\n",
      t.ping_us, t.set_controls_us, t.continue_us, t.state_us, t.collision_us, t.images_us);
}

void PrintLoopbackResults(const LoopbackRate& loop) {
  std::printf("RESULT loopback_steps_per_sec=%.0f\n", loop.env.steps_per_sec);
  std::printf("RESULT loopback_steps_per_process_cpu_sec=%.0f\n", loop.steps_per_process_cpu_sec);
  std::printf("RESULT loopback_requests_per_step=%.2f\n", loop.requests_per_step);
  std::printf("RESULT loopback_round_trips_per_step=%.2f\n", loop.round_trips_per_step);
  std::printf("RESULT loopback_pipelined=%d\n", loop.pipelined ? 1 : 0);
  std::printf("RESULT loopback_ping_us=%.1f\n", loop.calls.ping_us);
  std::printf("RESULT loopback_set_controls_us=%.1f\n", loop.calls.set_controls_us);
  std::printf("RESULT loopback_continue_for_time_us=%.1f\n", loop.calls.continue_us);
  std::printf("RESULT loopback_get_state_us=%.1f\n", loop.calls.state_us);
  std::printf("RESULT loopback_get_collision_us=%.1f\n", loop.calls.collision_us);
  std::printf("RESULT loopback_get_images_us=%.1f\n", loop.calls.images_us);
}

// Steering that follows the nearest centre line: heading error plus lateral offset, both towards
// the line, with the line's direction taken as the one closest to the car's heading.
float LaneKeepingSteering(const sim::RoadMap& map, const sim::DrivingCarState& car) {
  double best = 1e18;
  sim::Segment nearest;
  for (const sim::Segment& s : map.center_lines()) {
    const double d = sim::DistanceToSegment({car.x, car.y}, s);
    if (d < best) {
      best = d;
      nearest = s;
    }
  }
  double dx = nearest.b.x - nearest.a.x, dy = nearest.b.y - nearest.a.y;
  const double len = std::hypot(dx, dy);
  dx /= len;
  dy /= len;
  if (dx * std::cos(car.yaw) + dy * std::sin(car.yaw) < 0) {
    dx = -dx;
    dy = -dy;
  }
  // Signed lateral offset: positive when the car is to the right of the line (NED, z down).
  const double lateral = -(car.x - nearest.a.x) * dy + (car.y - nearest.a.y) * dx;
  const double heading_error = std::remainder(std::atan2(dy, dx) - car.yaw, 2 * M_PI);
  return static_cast<float>(std::clamp(1.5 * heading_error - 0.3 * lateral, -1.0, 1.0));
}

void DumpFrames(const sim::EmbeddedSimOptions& base, const std::string& dir, uint64_t seed) {
  sim::EmbeddedSimOptions options = base;
  options.num_parked_cars = absl::GetFlag(FLAGS_dump_parked_cars);
  absl::StatusOr<std::unique_ptr<sim::EmbeddedSim>> sim = sim::EmbeddedSim::Create(options);
  BENCH_CHECK_OK(sim.status());
  sim::DrivingEnvOptions env_options;
  env_options.actions.clear();
  for (int i = 0; i <= 20; ++i) env_options.actions.push_back({-1.0f + 0.1f * i, -1.0f, 0.0f});
  absl::StatusOr<std::unique_ptr<sim::DrivingEnv>> env =
      sim::DrivingEnv::Create(sim->get(), options.world->map(), env_options);
  BENCH_CHECK_OK(env.status());
  std::vector<uint8_t> obs((*env)->observation_size());
  std::vector<uint8_t> scene(static_cast<size_t>(options.camera.width) * options.camera.height * 3);
  absl::StatusOr<sim::StepResult> r = (*env)->Reset(seed, obs.data());
  BENCH_CHECK_OK(r.status());
  int written = 0;
  for (int step = 0; step < 300 && !r->done; ++step) {
    if (step % 10 == 0) {
      (*sim)->RenderScene(scene.data());
      BENCH_CHECK_OK(sim::WritePng(absl::StrFormat("%s/frame_%03d.png", dir, written++),
                                   scene.data(), options.camera.width, options.camera.height,
                                   sim::PixelOrder::kBgr));
    }
    const float steering = LaneKeepingSteering((*env)->map(), r->car);
    const int action = static_cast<int>(std::lround((steering + 1.0f) * 10.0f));
    r = (*env)->Step(action, obs.data());
    BENCH_CHECK_OK(r.status());
  }
  std::printf("wrote %d frames to %s (episode: %.1f s, %.0f m, ended: %s)\n", written, dir.c_str(),
              r->car.episode_time_sec, r->car.distance_driven_m,
              sim::TerminationReasonName(r->reason));
}

// Physics only: one fixed step, collision checks and a state read, no images; steps per
// wall-clock and per CPU-second.
void MeasurePhysics(sim::EmbeddedSim* sim, const sim::CarControls& controls, double seconds,
                    double* per_sec, double* per_cpu_sec) {
  BENCH_CHECK_OK(sim->Reset());
  BENCH_CHECK_OK(sim->SetControls(controls));
  int64_t steps = 0;
  const Meter meter;
  while (meter.wall() < seconds) {
    for (int i = 0; i < 1024; ++i) {
      sim->Step(1);
      BENCH_CHECK_OK(sim->GetState().status());
      if ((sim->steps() & 255) == 0) {
        BENCH_CHECK_OK(sim->GetCollisionInfo().status());
        BENCH_CHECK_OK(sim->Reset());
        BENCH_CHECK_OK(sim->SetControls(controls));
      }
      ++steps;
    }
  }
  *per_sec = steps / meter.wall();
  *per_cpu_sec = steps / meter.cpu();
}

int Main() {
  // Every numeric flag but --seed, which takes any value.
  if (!FlagsInRange(
          "convoy_bench_sim",
          {RealRange("seconds", absl::GetFlag(FLAGS_seconds), 0, kNoRealMax, Ends::kOpenMin),
           RealRange("airsim_steps_per_sec", absl::GetFlag(FLAGS_airsim_steps_per_sec), 0,
                     kNoRealMax, Ends::kOpenMin),
           IntRange("threads", absl::GetFlag(FLAGS_threads), 0, 1024),
           IntRange("dump_parked_cars", absl::GetFlag(FLAGS_dump_parked_cars), 0, 10000)})) {
    return kExitUsage;
  }
  const double seconds = absl::GetFlag(FLAGS_seconds);
  const uint64_t seed = absl::GetFlag(FLAGS_seed);
  Clock::time_point t0 = Clock::now();
  absl::StatusOr<std::shared_ptr<const sim::World>> world = sim::World::CreateDefault();
  BENCH_CHECK_OK(world.status());
  const double world_build_ms = Since(t0) * 1e3;

  sim::EmbeddedSimOptions sim_options;
  sim_options.world = *world;
  sim_options.num_parked_cars = 40;
  sim_options.seed = seed;
  sim::DrivingEnvOptions crop_options;

  if (absl::GetFlag(FLAGS_loopback_only)) {
    const LoopbackRate loop = MeasureLoopback(sim_options, crop_options, seconds, seed);
    std::printf("%-56s %12.0f\n", "DrivingEnv crop over AirSimClient->convoy_sim, steps/s",
                loop.env.steps_per_sec);
    std::printf("%-56s %12.0f\n", "  per CPU-second of client and server together",
                loop.steps_per_process_cpu_sec);
    std::printf("%-56s %12.2f\n", "  msgpack-rpc requests per step (resets included)",
                loop.requests_per_step);
    std::printf("%-56s %12.2f\n", "  round trips per step (resets included)",
                loop.round_trips_per_step);
    PrintLoopbackCallTimes(loop.calls);
    PrintLoopbackResults(loop);
    return 0;
  }

  // Render time per frame.
  absl::StatusOr<std::unique_ptr<sim::EmbeddedSim>> sim = sim::EmbeddedSim::Create(sim_options);
  BENCH_CHECK_OK(sim.status());
  std::vector<uint8_t> bgr(static_cast<size_t>(sim_options.camera.width) *
                           sim_options.camera.height * 3);
  int64_t frames = 0;
  const Meter render_meter;
  while (render_meter.wall() < seconds) {
    for (int i = 0; i < 64; ++i) {
      (*sim)->RenderScene(bgr.data());
      ++frames;
    }
  }
  const double render_us = render_meter.wall() / frames * 1e6;
  const double render_cpu_us = render_meter.cpu() / frames * 1e6;

  // Physics alone, without traffic here and with it below.
  sim::CarControls controls;
  controls.throttle = 0.5f;
  controls.steering = 0.05f;
  double physics_per_sec, physics_per_cpu_sec;
  MeasurePhysics(sim->get(), controls, seconds, &physics_per_sec, &physics_per_cpu_sec);

  absl::StatusOr<std::unique_ptr<sim::DrivingEnv>> crop_env =
      sim::DrivingEnv::CreateEmbedded(sim_options, crop_options);
  BENCH_CHECK_OK(crop_env.status());
  const EnvRate crop = MeasureEnv(crop_env->get(), seconds, seed);

  // The default scenario's scene: the same 40 parked cars and 24 moving ones.
  sim::EmbeddedSimOptions traffic_options = sim_options;
  {
    absl::StatusOr<sim::Scenario> traffic = sim::FindScenario("traffic");
    BENCH_CHECK_OK(traffic.status());
    sim::ApplyScenario(*traffic, &traffic_options, nullptr);
  }
  absl::StatusOr<std::unique_ptr<sim::EmbeddedSim>> traffic_sim =
      sim::EmbeddedSim::Create(traffic_options);
  BENCH_CHECK_OK(traffic_sim.status());
  double traffic_physics_per_sec, traffic_physics_per_cpu_sec;
  MeasurePhysics(traffic_sim->get(), controls, seconds, &traffic_physics_per_sec,
                 &traffic_physics_per_cpu_sec);
  absl::StatusOr<std::unique_ptr<sim::DrivingEnv>> traffic_env =
      sim::DrivingEnv::CreateEmbedded(traffic_options, crop_options);
  BENCH_CHECK_OK(traffic_env.status());
  const EnvRate traffic_crop = MeasureEnv(traffic_env->get(), seconds, seed);

  sim::DrivingEnvOptions gray_options;
  gray_options.observation = sim::ObservationKind::kGray84;
  absl::StatusOr<std::unique_ptr<sim::DrivingEnv>> gray_env =
      sim::DrivingEnv::CreateEmbedded(sim_options, gray_options);
  BENCH_CHECK_OK(gray_env.status());
  const EnvRate gray = MeasureEnv(gray_env->get(), seconds, seed);

  // The 84x84 observation only: the camera itself renders 84x84.
  sim::EmbeddedSimOptions small_camera = sim_options;
  small_camera.camera.width = 84;
  small_camera.camera.height = 84;
  absl::StatusOr<std::unique_ptr<sim::DrivingEnv>> small_env =
      sim::DrivingEnv::CreateEmbedded(small_camera, gray_options);
  BENCH_CHECK_OK(small_env.status());
  const EnvRate small = MeasureEnv(small_env->get(), seconds, seed);

  sim::DrivingEnvOptions blind_options;
  blind_options.observation = sim::ObservationKind::kNone;
  absl::StatusOr<std::unique_ptr<sim::DrivingEnv>> blind_env =
      sim::DrivingEnv::CreateEmbedded(sim_options, blind_options);
  BENCH_CHECK_OK(blind_env.status());
  const EnvRate blind = MeasureEnv(blind_env->get(), seconds, seed);

  // Independent simulators on parallel threads, one World shared between them.
  int threads = absl::GetFlag(FLAGS_threads);
  if (threads <= 0) threads = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::unique_ptr<sim::DrivingEnv>> parallel_envs;
  for (int t = 0; t < threads; ++t) {
    absl::StatusOr<std::unique_ptr<sim::DrivingEnv>> env =
        sim::DrivingEnv::CreateEmbedded(sim_options, crop_options);
    BENCH_CHECK_OK(env.status());
    parallel_envs.push_back(*std::move(env));
  }
  std::vector<EnvRate> parallel_rates(threads);
  {
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([&, t] {
        parallel_rates[t] = MeasureEnv(parallel_envs[t].get(), seconds, seed + 1000 * t);
      });
    }
    for (std::thread& w : workers) w.join();
  }
  double parallel_total = 0, parallel_cpu_total = 0;
  for (const EnvRate& r : parallel_rates) {
    parallel_total += r.steps_per_sec;
    parallel_cpu_total += r.steps_per_cpu_sec;
  }

  LoopbackRate loop;
  if (absl::GetFlag(FLAGS_loopback))
    loop = MeasureLoopback(sim_options, crop_options, seconds, seed);

  if (!absl::GetFlag(FLAGS_dump_frames).empty()) {
    DumpFrames(sim_options, absl::GetFlag(FLAGS_dump_frames), seed);
  }

  const double airsim = absl::GetFlag(FLAGS_airsim_steps_per_sec);
  auto row = [](const std::string& name, double wall, double cpu, int decimals) {
    if (cpu < 0) {
      std::printf("%-56s %12.*f %14s\n", name.c_str(), decimals, wall, "-");
    } else {
      std::printf("%-56s %12.*f %14.*f\n", name.c_str(), decimals, wall, decimals, cpu);
    }
  };
  std::printf("%-56s %12s %14s\n", "measurement (256x144 camera, 40 parked cars)", "wall-clock",
              "per CPU-second");
  row("world build (texture), ms", world_build_ms, -1, 1);
  row("render 256x144 scene, us/frame", render_us, render_cpu_us, 1);
  row("physics step + state, no images, steps/s", physics_per_sec, physics_per_cpu_sec, 0);
  row("DrivingEnv cookbook crop 3x59x255, steps/s", crop.steps_per_sec, crop.steps_per_cpu_sec, 0);
  row(absl::StrFormat("physics step + state, + %d moving cars, steps/s",
                      traffic_options.traffic.cars),
      traffic_physics_per_sec, traffic_physics_per_cpu_sec, 0);
  row(absl::StrFormat("DrivingEnv crop, + %d moving cars (traffic), steps/s",
                      traffic_options.traffic.cars),
      traffic_crop.steps_per_sec, traffic_crop.steps_per_cpu_sec, 0);
  row("DrivingEnv gray 84x84 from the 256x144 scene, steps/s", gray.steps_per_sec,
      gray.steps_per_cpu_sec, 0);
  row("DrivingEnv gray 84x84 from an 84x84 camera, steps/s", small.steps_per_sec,
      small.steps_per_cpu_sec, 0);
  row("DrivingEnv without images, steps/s", blind.steps_per_sec, blind.steps_per_cpu_sec, 0);
  row(absl::StrFormat("DrivingEnv crop, %d threads, total steps/s", threads), parallel_total,
      parallel_cpu_total, 0);
  if (absl::GetFlag(FLAGS_loopback)) {
    row("DrivingEnv crop over AirSimClient->convoy_sim, steps/s", loop.env.steps_per_sec, -1, 0);
    row("  msgpack-rpc requests per loopback step (resets included)", loop.requests_per_step, -1,
        2);
    row("  round trips per loopback step (resets included)", loop.round_trips_per_step, -1, 2);
  }
  row(absl::StrFormat("ratio to AirSim real time (%.0f steps/s), crop", airsim),
      crop.steps_per_sec / airsim, crop.steps_per_cpu_sec / airsim, 0);
  std::printf(
      "(DrivingEnv step = %.2f s of simulation: %d physics steps, one rendered frame. Per "
      "CPU-second: the rate on one whole core, from the stepping thread's CPU time.)\n",
      crop_options.control_period_sec,
      static_cast<int>(std::lround(crop_options.control_period_sec / sim_options.step_seconds)));
  std::printf("RESULT world_build_ms=%.1f\n", world_build_ms);
  std::printf("RESULT render_us_per_frame=%.1f\n", render_us);
  std::printf("RESULT render_cpu_us_per_frame=%.1f\n", render_cpu_us);
  std::printf("RESULT physics_steps_per_sec=%.0f\n", physics_per_sec);
  std::printf("RESULT physics_steps_per_cpu_sec=%.0f\n", physics_per_cpu_sec);
  std::printf("RESULT env_steps_per_sec_crop=%.0f\n", crop.steps_per_sec);
  std::printf("RESULT env_steps_per_cpu_sec_crop=%.0f\n", crop.steps_per_cpu_sec);
  std::printf("RESULT traffic_cars=%d\n", traffic_options.traffic.cars);
  std::printf("RESULT physics_steps_per_cpu_sec_traffic=%.0f\n", traffic_physics_per_cpu_sec);
  std::printf("RESULT env_steps_per_sec_crop_traffic=%.0f\n", traffic_crop.steps_per_sec);
  std::printf("RESULT env_steps_per_cpu_sec_crop_traffic=%.0f\n", traffic_crop.steps_per_cpu_sec);
  std::printf("RESULT traffic_crop_cost_ratio=%.3f\n",
              traffic_crop.steps_per_cpu_sec / crop.steps_per_cpu_sec);
  std::printf("RESULT env_steps_per_sec_gray84=%.0f\n", gray.steps_per_sec);
  std::printf("RESULT env_steps_per_cpu_sec_gray84=%.0f\n", gray.steps_per_cpu_sec);
  std::printf("RESULT env_steps_per_sec_gray84_camera84=%.0f\n", small.steps_per_sec);
  std::printf("RESULT env_steps_per_cpu_sec_gray84_camera84=%.0f\n", small.steps_per_cpu_sec);
  std::printf("RESULT env_steps_per_sec_no_images=%.0f\n", blind.steps_per_sec);
  std::printf("RESULT env_steps_per_cpu_sec_no_images=%.0f\n", blind.steps_per_cpu_sec);
  std::printf("RESULT env_threads=%d\n", threads);
  std::printf("RESULT env_steps_per_sec_crop_all_threads=%.0f\n", parallel_total);
  if (absl::GetFlag(FLAGS_loopback)) {
    PrintLoopbackResults(loop);
  }
  std::printf("RESULT ratio_to_airsim_realtime=%.0f\n", crop.steps_per_sec / airsim);
  std::printf("RESULT ratio_to_airsim_realtime_per_cpu_sec=%.0f\n",
              crop.steps_per_cpu_sec / airsim);
  return 0;
}

}  // namespace
}  // namespace convoy::bench

int main(int argc, char** argv) {
  convoy::InitProcess(argc, argv,
                      "convoy_bench_sim: EmbeddedSim and convoy_sim speed. Prints a table and "
                      "RESULT key=value lines.");
  return convoy::bench::Main();
}
