#include "simulator_bridge/task/driving_env.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "simulator_bridge/task/scenario.h"
#include "tests/catch.h"
#include "tests/simulator_bridge/world/test_world.h"

namespace convoy::sim {
namespace {

std::unique_ptr<DrivingEnv> MakeEnv(const DrivingEnvOptions& options = {}, int parked = 0) {
  EmbeddedSimOptions sim;
  sim.world = TestWorld();
  sim.num_parked_cars = parked;
  absl::StatusOr<std::unique_ptr<DrivingEnv>> env = DrivingEnv::CreateEmbedded(sim, options);
  REQUIRE(env.ok());
  return *std::move(env);
}

// Resets `env` on the first seed that starts on a straight with at least `free_m` of road ahead.
void StartOnStraight(DrivingEnv& env, double free_m, uint8_t* observation) {
  for (uint64_t seed = 0;; ++seed) {
    REQUIRE(seed < 100);
    StepResult r = *env.Reset(seed, observation);
    double free = 0;
    while (free < free_m &&
           env.map().DistanceToCenterLine({r.car.x + free * std::cos(r.car.yaw),
                                           r.car.y + free * std::sin(r.car.yaw)}) < 0.1) {
      free += 1.0;
    }
    if (free >= free_m) return;
  }
}

TEST_CASE("observation shapes follow the options", "[driving_env]") {
  CHECK(MakeEnv()->observation_shape() == std::array<int, 3>{3, 59, 255});
  DrivingEnvOptions gray;
  gray.observation = ObservationKind::kGray84;
  gray.frame_stack = 4;
  std::unique_ptr<DrivingEnv> env = MakeEnv(gray);
  CHECK(env->observation_shape() == std::array<int, 3>{4, 84, 84});
  CHECK(env->observation_size() == 4u * 84u * 84u);
  CHECK(env->num_actions() == 5);
}

TEST_CASE("each action's mirror image steers the other way", "[driving_env]") {
  absl::StatusOr<std::vector<int64_t>> mirror = MirrorActions(CookbookActions());
  REQUIRE(mirror.ok());
  CHECK(*mirror == std::vector<int64_t>{4, 3, 2, 1, 0});
  std::vector<DrivingAction> lopsided = {{0.0f, -1.0f, 0.0f}, {0.5f, -1.0f, 0.0f}};
  absl::StatusOr<std::vector<int64_t>> none = MirrorActions(lopsided);
  REQUIRE(none.status().code() == absl::StatusCode::kNotFound);
  CHECK(none.status().message() ==
        "action 1 (steering 0.5) has no mirror image: no action steers -0.5 with the same throttle "
        "and brake");
  // The same steering with another throttle is not a mirror image.
  lopsided.push_back({-0.5f, 0.5f, 0.0f});
  CHECK(MirrorActions(lopsided).status().code() == absl::StatusCode::kNotFound);
}

TEST_CASE("every start is on the road, on the centre line, headed along it", "[driving_env]") {
  std::unique_ptr<DrivingEnv> env = MakeEnv();
  std::vector<uint8_t> obs(env->observation_size());
  std::set<int> headings;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    absl::StatusOr<StepResult> r = env->Reset(seed, obs.data());
    REQUIRE(r.ok());
    CHECK_FALSE(r->done);
    CHECK(r->car.distance_to_center_m < 0.05);
    CHECK(r->reward > 0.94f);
    CHECK(TestWorld()->IsDrivable({r->car.x, r->car.y}));
    // Headed along the road: the centre line 5 m ahead is still within a few centimetres.
    const Vec2 ahead{r->car.x + 5.0 * std::cos(r->car.yaw), r->car.y + 5.0 * std::sin(r->car.yaw)};
    CHECK(env->map().DistanceToCenterLine(ahead) < 0.05);
    headings.insert(static_cast<int>(std::lround(r->car.yaw / (M_PI / 2))) & 3);
  }
  CHECK(headings.size() == 4);  // all four directions of the grid occur
}

TEST_CASE("the start pose depends only on the seed", "[driving_env]") {
  std::unique_ptr<DrivingEnv> env = MakeEnv();
  std::vector<uint8_t> a(env->observation_size()), b(env->observation_size());
  StepResult ra = *env->Reset(42, a.data());
  REQUIRE(env->Step(4, a.data()).ok());
  StepResult rb = *env->Reset(42, b.data());
  CHECK(ra.car.x == rb.car.x);
  CHECK(ra.car.y == rb.car.y);
  std::vector<uint8_t> c(env->observation_size());
  REQUIRE(env->Reset(42, c.data()).ok());
  env->Reset(42, a.data()).IgnoreError();
  CHECK(a == c);
}

TEST_CASE("steering hard off the road ends the episode with a reason", "[driving_env]") {
  std::unique_ptr<DrivingEnv> env = MakeEnv();
  std::vector<uint8_t> obs(env->observation_size());
  REQUIRE(env->Reset(3, obs.data()).ok());
  StepResult r;
  int steps = 0;
  while (!r.done && steps < 500) {
    absl::StatusOr<StepResult> s = env->Step(4, obs.data());  // full right
    REQUIRE(s.ok());
    r = *s;
    ++steps;
  }
  REQUIRE(r.done);
  CHECK(
      (r.reason == TerminationReason::kCollision || r.reason == TerminationReason::kOffCenterLine));
  CHECK(r.car.distance_driven_m > 1.0);
  CHECK(absl::IsFailedPrecondition(env->Step(2, obs.data()).status()));
  CHECK(absl::IsFailedPrecondition(MakeEnv()->Step(0, obs.data()).status()));
  REQUIRE(env->Reset(3, obs.data()).ok());
  CHECK(absl::IsInvalidArgument(env->Step(5, obs.data()).status()));
  CHECK(absl::IsInvalidArgument(env->Step(-1, obs.data()).status()));
}

TEST_CASE("a failure costs the penalty on its last step", "[driving_env]") {
  // The same drive off the road with and without a penalty: every reward the same but the last.
  auto drive_off = [](double penalty) {
    DrivingEnvOptions options;
    options.observation = ObservationKind::kNone;
    options.failure_penalty = penalty;
    std::unique_ptr<DrivingEnv> env = MakeEnv(options);
    REQUIRE(env->Reset(3, nullptr).ok());
    std::vector<float> rewards;
    StepResult r;
    while (!r.done && rewards.size() < 500) {
      r = *env->Step(4, nullptr);  // full right
      rewards.push_back(r.reward);
    }
    REQUIRE(r.done);
    REQUIRE_FALSE(IsTruncation(r.reason));
    return rewards;
  };
  const std::vector<float> plain = drive_off(0.0);
  const std::vector<float> penalized = drive_off(10.0);
  REQUIRE(plain.size() == penalized.size());
  REQUIRE(plain.size() > 1);
  CHECK(std::equal(plain.begin(), plain.end() - 1, penalized.begin()));
  CHECK(plain.back() >= 0.0f);
  CHECK(penalized.back() == Approx(plain.back() - 10.0f));
  // A route driven to its end is cut short, not failed: the route test below checks it keeps
  // its reward under a penalty.
}

TEST_CASE("the cookbook throttle rule holds the speed near 9 m/s and the time limit ends it",
          "[driving_env]") {
  DrivingEnvOptions options;
  options.max_epoch_runtime_sec = 6.0;
  std::unique_ptr<DrivingEnv> env = MakeEnv(options);
  std::vector<uint8_t> obs(env->observation_size());
  StartOnStraight(*env, 60.0, obs.data());
  StepResult r;
  double max_speed = 0;
  while (!r.done) {
    absl::StatusOr<StepResult> s = env->Step(2, obs.data());
    REQUIRE(s.ok());
    r = *s;
    max_speed = std::max(max_speed, r.car.speed);
  }
  CHECK(r.reason == TerminationReason::kTimeLimit);
  CHECK(r.car.episode_time_sec == Approx(6.0).margin(0.11));
  CHECK(max_speed > 8.5);
  CHECK(max_speed < 9.5);
  CHECK(r.reward > 0.9f);  // straight along the centre line
}

TEST_CASE("with a route, the episode is completed once the car has driven it", "[driving_env]") {
  DrivingEnvOptions options;
  options.observation = ObservationKind::kNone;
  options.route_length_m = 30.0;
  options.max_epoch_runtime_sec = 60.0;
  options.failure_penalty = 10.0;  // not charged: a completed route is no failure
  std::unique_ptr<DrivingEnv> env = MakeEnv(options);
  StartOnStraight(*env, 40.0, nullptr);
  StepResult r;
  while (!r.done) r = *env->Step(2, nullptr);
  CHECK(r.reason == TerminationReason::kCompleted);
  CHECK(r.reward > 0.9f);
  CHECK(r.car.distance_driven_m >= 30.0);
  CHECK(r.car.distance_driven_m < 31.0);
  CHECK(IsSuccess(r.reason, options));
  CHECK(IsTruncation(r.reason));
  CHECK(TaskCompletion(r.reason, r.car, options) == 1.0);
  // A time limit before the route's end is no success; the completion is the distance's share.
  DrivingCarState halfway;
  halfway.distance_driven_m = 12.0;
  CHECK_FALSE(IsSuccess(TerminationReason::kTimeLimit, options));
  CHECK(TaskCompletion(TerminationReason::kTimeLimit, halfway, options) == Approx(0.4));
  // Without a route, the time limit is the task, and the completion is the time's share.
  DrivingEnvOptions cookbook;
  CHECK(IsSuccess(TerminationReason::kTimeLimit, cookbook));
  halfway.episode_time_sec = 7.5;
  CHECK(TaskCompletion(TerminationReason::kCollision, halfway, cookbook) == Approx(0.25));
}

TEST_CASE("scenarios are found by name, and an unknown one is named with the known ones",
          "[driving_env][scenario]") {
  absl::StatusOr<Scenario> traffic = FindScenario(kDefaultScenario);
  REQUIRE(traffic.ok());
  EmbeddedSimOptions sim;
  DrivingEnvOptions env;
  ApplyScenario(*traffic, &sim, &env);
  CHECK(sim.num_parked_cars == 20);
  CHECK(sim.num_stalled_cars == 8);
  CHECK(sim.traffic.cars == 24);
  CHECK(env.route_length_m == 500.0);
  CHECK(env.max_epoch_runtime_sec == 90.0);
  CHECK(env.failure_penalty == 10.0);
  absl::StatusOr<Scenario> empty = FindScenario("empty");
  REQUIRE(empty.ok());
  ApplyScenario(*empty, &sim, &env);
  CHECK(sim.num_parked_cars == 0);
  CHECK(sim.num_stalled_cars == 0);
  CHECK(sim.traffic.cars == 0);
  CHECK(env.route_length_m == 0.0);
  CHECK(env.max_epoch_runtime_sec == 30.0);
  CHECK(env.failure_penalty == 0.0);  // the cookbook's reward
  absl::StatusOr<Scenario> unknown = FindScenario("rush_hour");
  CHECK(absl::IsInvalidArgument(unknown.status()));
  CHECK(unknown.status().message() ==
        "--scenario: unknown scenario 'rush_hour'; known: traffic, parked, empty");
}

TEST_CASE("a car that does not move ends as too slow after the grace period", "[driving_env]") {
  DrivingEnvOptions options;
  options.actions = {DrivingAction{0.0f, 0.0f, 1.0f}};  // brake only
  std::unique_ptr<DrivingEnv> env = MakeEnv(options);
  std::vector<uint8_t> obs(env->observation_size());
  REQUIRE(env->Reset(1, obs.data()).ok());
  StepResult r;
  int steps = 0;
  while (!r.done && steps++ < 100) r = *env->Step(0, obs.data());
  CHECK(r.reason == TerminationReason::kTooSlow);
  CHECK(r.car.episode_time_sec > options.min_speed_grace_sec);
}

TEST_CASE("the crop is the scene's rows 76..134 in CHW order", "[driving_env]") {
  EmbeddedSimOptions sim_options;
  sim_options.world = TestWorld();
  std::unique_ptr<EmbeddedSim> sim = *EmbeddedSim::Create(sim_options);
  std::unique_ptr<DrivingEnv> env = *DrivingEnv::Create(sim.get(), TestWorld()->map(), {});
  std::vector<uint8_t> obs(env->observation_size());
  REQUIRE(env->Reset(9, obs.data()).ok());
  std::vector<uint8_t> scene(256 * 144 * 3);
  sim->RenderScene(scene.data());
  bool same = true;
  for (int c = 0; c < 3; ++c) {
    for (int y = 0; y < 59; ++y) {
      for (int x = 0; x < 255; ++x) {
        same &= obs[(c * 59 + y) * 255 + x] == scene[((76 + y) * 256 + x) * 3 + c];
      }
    }
  }
  CHECK(same);
}

TEST_CASE("frame stacking shifts frames oldest first", "[driving_env]") {
  DrivingEnvOptions options;
  options.observation = ObservationKind::kGray84;
  options.frame_stack = 3;
  std::unique_ptr<DrivingEnv> env = MakeEnv(options);
  const size_t frame = 84 * 84;
  std::vector<uint8_t> o0(env->observation_size()), o1(env->observation_size()),
      o2(env->observation_size());
  REQUIRE(env->Reset(5, o0.data()).ok());
  CHECK(std::equal(o0.begin(), o0.begin() + frame, o0.begin() + frame));
  CHECK(std::equal(o0.begin(), o0.begin() + frame, o0.begin() + 2 * frame));
  REQUIRE(env->Step(2, o1.data()).ok());
  REQUIRE(env->Step(2, o2.data()).ok());
  CHECK(std::equal(o1.begin() + 2 * frame, o1.end(), o2.begin() + frame));  // newest moved down
  CHECK(std::equal(o0.begin(), o0.begin() + frame, o2.begin()));            // first is oldest
  CHECK_FALSE(std::equal(o2.begin() + frame, o2.begin() + 2 * frame, o2.begin() + 2 * frame));
}

TEST_CASE("episodes are reproducible for a seed and action sequence", "[driving_env]") {
  auto run = [](uint64_t seed) {
    std::unique_ptr<DrivingEnv> env = MakeEnv({}, 30);
    std::vector<uint8_t> obs(env->observation_size());
    std::vector<float> rewards;
    uint64_t checksum = 0;
    REQUIRE(env->Reset(seed, obs.data()).ok());
    for (int i = 0; i < 80; ++i) {
      absl::StatusOr<StepResult> r = env->Step((i * 7 / 3) % 5, obs.data());
      REQUIRE(r.ok());
      rewards.push_back(r->reward);
      for (uint8_t b : obs) checksum = checksum * 131 + b;
      if (r->done) REQUIRE(env->Reset(seed + i + 1, obs.data()).ok());
    }
    return std::make_pair(rewards, checksum);
  };
  CHECK(run(17) == run(17));
  CHECK(run(17).second != run(18).second);
}

}  // namespace
}  // namespace convoy::sim

namespace convoy::sim {
namespace {

TEST_CASE("the 84x84 observation is the area-averaged luma of the scene", "[driving_env]") {
  EmbeddedSimOptions sim_options;
  sim_options.world = TestWorld();
  sim_options.num_parked_cars = 20;
  std::unique_ptr<EmbeddedSim> sim = *EmbeddedSim::Create(sim_options);
  DrivingEnvOptions options;
  options.observation = ObservationKind::kGray84;
  std::unique_ptr<DrivingEnv> env = *DrivingEnv::Create(sim.get(), TestWorld()->map(), options);
  std::vector<uint8_t> obs(env->observation_size());
  REQUIRE(env->Reset(11, obs.data()).ok());
  REQUIRE(env->Step(3, obs.data()).ok());
  std::vector<uint8_t> scene(256 * 144 * 3);
  sim->RenderScene(scene.data());
  int mismatches = 0;
  for (int oy = 0; oy < 84; ++oy) {
    for (int ox = 0; ox < 84; ++ox) {
      const int y0 = oy * 144 / 84, y1 = std::max((oy + 1) * 144 / 84, y0 + 1);
      const int x0 = ox * 256 / 84, x1 = std::max((ox + 1) * 256 / 84, x0 + 1);
      double luma = 0.0;
      for (int y = y0; y < y1; ++y) {
        for (int x = x0; x < x1; ++x) {
          const uint8_t* p = &scene[(y * 256 + x) * 3];
          luma += 0.114 * p[0] + 0.587 * p[1] + 0.299 * p[2];
        }
      }
      luma /= (y1 - y0) * (x1 - x0);
      if (std::abs(obs[oy * 84 + ox] - luma) > 1.0) ++mismatches;
    }
  }
  CHECK(mismatches == 0);
}

}  // namespace
}  // namespace convoy::sim
