#include "simulator_bridge/world/traffic.h"

#include <cmath>
#include <limits>
#include <vector>

#include "simulator_bridge/task/expert_driver.h"
#include "simulator_bridge/task/scenario.h"
#include "simulator_bridge/world/embedded_sim.h"
#include "tests/catch.h"
#include "tests/simulator_bridge/world/test_world.h"

namespace convoy::sim {
namespace {

std::unique_ptr<EmbeddedSim> MakeTrafficSim(int traffic_cars, int parked_cars, uint64_t seed = 5,
                                            int stalled_cars = 0) {
  EmbeddedSimOptions options;
  options.world = TestWorld();
  options.num_parked_cars = parked_cars;
  options.num_stalled_cars = stalled_cars;
  options.traffic.cars = traffic_cars;
  options.seed = seed;
  absl::StatusOr<std::unique_ptr<EmbeddedSim>> sim = EmbeddedSim::Create(options);
  REQUIRE(sim.ok());
  return *std::move(sim);
}

// Out of everyone's way: on the grass west of the map, far from every road.
void ParkEgoAway(EmbeddedSim& sim) {
  REQUIRE(sim.SetPose(PoseAt(-400.0, -400.0, 0.0), /*ignore_collision=*/true).ok());
}

std::vector<Obstacle> TrafficBoxes(const EmbeddedSim& sim) {
  return {sim.obstacles().begin() + sim.num_parked_cars(), sim.obstacles().end()};
}

TEST_CASE("traffic has two lanes per road and a curve for every way through a junction",
          "[traffic]") {
  std::unique_ptr<EmbeddedSim> sim = MakeTrafficSim(1, 0);
  const Traffic& traffic = sim->traffic();
  CHECK(traffic.num_lanes() == 2 * static_cast<int>(TestWorld()->map().roads().size()));
  // Neighborhood, without U-turns: 4 corners (2 ways in, 1 on each), 6 T-junctions (3 in, 2 on
  // each) and 1 crossing (4 in, 3 on each): 4*2 + 6*6 + 12 = 56 curves.
  CHECK(traffic.num_paths() - traffic.num_lanes() == 56);
}

TEST_CASE("traffic is a function of the seed", "[traffic]") {
  std::unique_ptr<EmbeddedSim> a = MakeTrafficSim(12, 30);
  std::unique_ptr<EmbeddedSim> b = MakeTrafficSim(12, 30);
  for (auto* sim : {a.get(), b.get()}) {
    ParkEgoAway(*sim);
    REQUIRE(sim->ResetScene(99).ok());
    ParkEgoAway(*sim);
    sim->Step(400);
  }
  const std::vector<Obstacle> boxes_a = TrafficBoxes(*a), boxes_b = TrafficBoxes(*b);
  REQUIRE(boxes_a.size() == 12);
  REQUIRE(boxes_b.size() == 12);
  for (size_t i = 0; i < boxes_a.size(); ++i) {
    CHECK(boxes_a[i].center.x == boxes_b[i].center.x);
    CHECK(boxes_a[i].center.y == boxes_b[i].center.y);
    CHECK(boxes_a[i].name == "TrafficCar_" + std::to_string(i + 1));
  }
  REQUIRE(b->ResetScene(100).ok());
  const std::vector<Obstacle> other = TrafficBoxes(*b);
  int moved = 0;
  for (size_t i = 0; i < other.size(); ++i) {
    if (std::hypot(other[i].center.x - boxes_a[i].center.x,
                   other[i].center.y - boxes_a[i].center.y) > 1.0) {
      ++moved;
    }
  }
  CHECK(moved >= 10);
}

TEST_CASE("traffic keeps moving, on the road, clear of parked cars and of itself", "[traffic]") {
  for (uint64_t seed : {1, 2, 3}) {
    CAPTURE(seed);
    std::unique_ptr<EmbeddedSim> sim = MakeTrafficSim(24, 40, seed);
    ParkEgoAway(*sim);
    const World& world = *TestWorld();
    const int n = sim->traffic().size();
    REQUIRE(n == 24);
    std::vector<double> travelled(n, 0.0);
    std::vector<Obstacle> last = TrafficBoxes(*sim);
    int overlaps = 0, off_road = 0, into_parked = 0;
    for (int tick = 0; tick < 1200; ++tick) {  // 3 minutes in 0.15 s ticks
      sim->Step(3);
      const std::vector<Obstacle> boxes = TrafficBoxes(*sim);
      for (int i = 0; i < n; ++i) {
        travelled[i] +=
            std::hypot(boxes[i].center.x - last[i].center.x, boxes[i].center.y - last[i].center.y);
        if (!world.IsDrivable(boxes[i].center)) ++off_road;
        for (int j = i + 1; j < n; ++j) overlaps += ObstaclesOverlap(boxes[i], boxes[j]);
        for (int p = 0; p < sim->num_parked_cars(); ++p) {
          into_parked += ObstaclesOverlap(boxes[i], sim->obstacles()[p]);
        }
      }
      last = boxes;
    }
    CHECK(overlaps == 0);
    CHECK(off_road == 0);
    CHECK(into_parked == 0);
    // Waiting at junctions (one car at a time crosses one) and behind each other, every car
    // still gets around: none is stuck for good, and together they keep moving.
    double total = 0.0;
    for (int i = 0; i < n; ++i) {
      CAPTURE(i);
      CHECK(travelled[i] > 150.0);
      total += travelled[i];
    }
    CHECK(total / n > 0.25 * 7.5 * 180.0);
  }
}

TEST_CASE("traffic stops for the ego car standing in its lane", "[traffic]") {
  std::unique_ptr<EmbeddedSim> sim = MakeTrafficSim(30, 0, 11);
  // Across a lane of the road x = -127.9 (it runs along y); the lane right of the centre for
  // cars going towards -y is at x + lane_offset_m (NED: x north, y east). Every car that comes
  // down it must stop.
  constexpr double kRoadX = -127.91722656;
  const double lane = TrafficOptions{}.lane_offset_m;
  REQUIRE(sim->SetPose(PoseAt(kRoadX + lane, -150.0, 0.5 * M_PI), false).ok());
  bool stood_behind = false;
  for (int tick = 0; tick < 600; ++tick) {  // 90 s
    sim->Step(3);
    REQUIRE(sim->GetCollisionInfo()->has_collided == false);
    const std::vector<Obstacle> boxes = TrafficBoxes(*sim);
    for (int i = 0; i < static_cast<int>(boxes.size()); ++i) {
      if (std::abs(boxes[i].center.x - (kRoadX + lane)) < 0.3 && boxes[i].center.y > -150.0 &&
          boxes[i].center.y < -130.0 && sim->traffic().speed(i) < 0.1) {
        stood_behind = true;
      }
    }
  }
  CHECK(stood_behind);
}

TEST_CASE("the ego car that drives into traffic collides with a named traffic car", "[traffic]") {
  std::unique_ptr<EmbeddedSim> sim = MakeTrafficSim(1, 0, 3);
  ParkEgoAway(*sim);
  const Obstacle car = TrafficBoxes(*sim)[0];
  // Head-on in its lane, 25 m ahead of it, full throttle (put down without ignore_collision, so
  // the traffic is not moved out of its way).
  const double c = std::cos(car.yaw), s = std::sin(car.yaw);
  REQUIRE(
      sim->SetPose(PoseAt(car.center.x + 25.0 * c, car.center.y + 25.0 * s, car.yaw + M_PI), false)
          .ok());
  CarControls controls;
  controls.throttle = 1.0f;
  REQUIRE(sim->SetControls(controls).ok());
  CollisionInfo info;
  for (int tick = 0; tick < 100 && !info.has_collided; ++tick) {
    sim->Step(2);
    info = *sim->GetCollisionInfo();
  }
  REQUIRE(info.has_collided);
  CHECK(info.object_name == "TrafficCar_1");
  CHECK(info.object_id == kTrafficCarIdBase + 1);
}

TEST_CASE("a car put down with ignore_collision finds the traffic cleared around it", "[traffic]") {
  std::unique_ptr<EmbeddedSim> sim = MakeTrafficSim(24, 0, 9);
  ParkEgoAway(*sim);
  const Obstacle car = TrafficBoxes(*sim)[3];
  REQUIRE(sim->SetPose(PoseAt(car.center.x, car.center.y, car.yaw), true).ok());
  REQUIRE(sim->traffic().size() == 24);
  for (const Obstacle& box : TrafficBoxes(*sim)) {
    CHECK(std::hypot(box.center.x - car.center.x, box.center.y - car.center.y) >= 30.0);
  }
  sim->Step(20);
  CHECK(sim->GetCollisionInfo()->has_collided == false);
}

// A scenario's DrivingEnv without images, for the scripted expert, its scene from `seed`.
std::unique_ptr<DrivingEnv> ScenarioEnv(const char* name, uint64_t seed) {
  absl::StatusOr<Scenario> scenario = FindScenario(name);
  REQUIRE(scenario.ok());
  EmbeddedSimOptions sim_options;
  sim_options.world = TestWorld();
  sim_options.seed = seed;
  DrivingEnvOptions env_options;
  env_options.observation = ObservationKind::kNone;
  ApplyScenario(*scenario, &sim_options, &env_options);
  absl::StatusOr<std::unique_ptr<DrivingEnv>> env =
      DrivingEnv::CreateEmbedded(sim_options, env_options);
  REQUIRE(env.ok());
  return *std::move(env);
}

TEST_CASE("no episode starts where traffic is already committed to the car's path",
          "[traffic][expert]") {
  // A car placed just before a pass or a junction, at speed, could not stop for the ego car put
  // down ahead of it. Over 200 starts the scripted expert meets no traffic car in its first 60 m.
  std::unique_ptr<DrivingEnv> env = ScenarioEnv("traffic", 0);
  ExpertDriver expert(env->map());
  int early_vehicle_collisions = 0;
  for (uint64_t seed = 900000000001ull; seed < 900000000001ull + 200 * 7919ull; seed += 7919) {
    absl::StatusOr<StepResult> step = env->Reset(seed, nullptr);
    REQUIRE(step.ok());
    while (!step->done && step->car.distance_driven_m < 60.0) {
      step = env->Step(*expert.Act(*env), nullptr);
      REQUIRE(step.ok());
    }
    if (step->car.collided && step->car.collided_with.rfind(kTrafficCarNamePrefix, 0) == 0) {
      UNSCOPED_INFO("seed " << seed);
      ++early_vehicle_collisions;
    }
  }
  CHECK(early_vehicle_collisions == 0);
}

// The scripted expert over 40 seeds of a scenario, as the fraction of episodes it completed.
double ExpertCompletes(const char* scenario_name) {
  std::unique_ptr<DrivingEnv> env = ScenarioEnv(scenario_name, 1);
  ExpertDriver expert(env->map());
  int completed = 0;
  constexpr int kEpisodes = 40;
  for (int e = 0; e < kEpisodes; ++e) {
    absl::StatusOr<StepResult> step = env->Reset(500 + e, nullptr);
    REQUIRE(step.ok());
    while (!step->done) {
      absl::StatusOr<int> action = expert.Act(*env);
      REQUIRE(action.ok());
      step = env->Step(*action, nullptr);
      REQUIRE(step.ok());
    }
    completed += IsSuccess(step->reason, env->options()) ? 1 : 0;
  }
  return static_cast<double>(completed) / kEpisodes;
}

TEST_CASE("the scripted expert completes empty roads and most of the traffic scenario",
          "[traffic][expert]") {
  CHECK(ExpertCompletes("empty") == 1.0);
  CHECK(ExpertCompletes("parked") == 1.0);
  // Traffic yields to it at junctions and passes, but it cannot brake: a few episodes end on a
  // car already crossing its way.
  CHECK(ExpertCompletes("traffic") >= 0.85);
}

}  // namespace
// Where a road's centre line is nearest to p, and how far p lies from that road's ends.
double DistanceToRoadEnds(const RoadMap& map, const Vec2& p, double* from_centre) {
  double best = std::numeric_limits<double>::infinity(), ends = 0.0;
  for (const Segment& r : map.roads()) {
    const double d = DistanceToSegment(p, r);
    if (d < best) {
      best = d;
      ends = std::min(std::hypot(p.x - r.a.x, p.y - r.a.y), std::hypot(p.x - r.b.x, p.y - r.b.y));
    }
  }
  *from_centre = best;
  return ends;
}

std::vector<Obstacle> StalledCars(const EmbeddedSim& sim) {
  std::vector<Obstacle> stalled;
  for (const Obstacle& o : sim.obstacles()) {
    if (o.name.rfind(kStalledCarNamePrefix, 0) == 0) stalled.push_back(o);
  }
  return stalled;
}

TEST_CASE("stalled cars stand on the centre line, laid out per episode, clear of the car put down",
          "[traffic]") {
  std::unique_ptr<EmbeddedSim> sim = MakeTrafficSim(24, 20, /*seed=*/0, /*stalled_cars=*/8);
  REQUIRE(sim->ResetScene(11).ok());
  const std::vector<Obstacle> first = StalledCars(*sim);
  REQUIRE(first.size() >= 5);
  CHECK(static_cast<int>(first.size()) == sim->num_stalled_cars());
  for (const Obstacle& o : first) {
    double from_centre = 0.0;
    CHECK(DistanceToRoadEnds(TestWorld()->map(), o.center, &from_centre) >=
          kStalledCarJunctionM - 1e-6);
    CHECK(from_centre < 1e-6);
    CHECK(o.id > kStalledCarIdBase);
    for (const Obstacle& other : sim->obstacles()) {
      if (&other == &o || other.name == o.name) continue;
      CHECK(std::hypot(other.center.x - o.center.x, other.center.y - o.center.y) >= 6.0);
    }
  }
  // The same seed lays out the same scene; another seed another.
  REQUIRE(sim->ResetScene(12).ok());
  const std::vector<Obstacle> other = StalledCars(*sim);
  REQUIRE(sim->ResetScene(11).ok());
  const std::vector<Obstacle> again = StalledCars(*sim);
  REQUIRE(again.size() == first.size());
  for (size_t i = 0; i < first.size(); ++i) {
    CHECK(again[i].center.x == first[i].center.x);
    CHECK(again[i].center.y == first[i].center.y);
  }
  CHECK((other.size() != first.size() || other[0].center.x != first[0].center.x ||
         other[0].center.y != first[0].center.y));
  // Put down on a stalled car, the car finds none within 50 m and has not collided.
  Pose pose;
  pose.position = {static_cast<float>(first[0].center.x), static_cast<float>(first[0].center.y),
                   0.0f};
  pose.orientation = QuaternionFromYaw(first[0].yaw);
  REQUIRE(sim->SetPose(pose, /*ignore_collision=*/true).ok());
  for (const Obstacle& o : StalledCars(*sim)) {
    CHECK(std::hypot(o.center.x - first[0].center.x, o.center.y - first[0].center.y) >= 50.0);
  }
  CHECK(sim->GetCollisionInfo()->has_collided == false);
}

TEST_CASE("stalled cars are in the way: a driver blind to them hits them, the expert goes around",
          "[traffic][expert]") {
  std::unique_ptr<DrivingEnv> env = ScenarioEnv("traffic", 1);
  ExpertDriver expert(env->map());
  int blind_hits = 0, expert_hits = 0;
  constexpr int kEpisodes = 10;
  for (int blind = 0; blind < 2; ++blind) {
    for (int e = 0; e < kEpisodes; ++e) {
      absl::StatusOr<StepResult> step = env->Reset(700 + e, nullptr);
      REQUIRE(step.ok());
      while (!step->done) {
        // Blind: the expert's sight ends at 0 m, so it knows none of them.
        absl::StatusOr<int> action = blind ? expert.Act(*env, /*sight_m=*/0.0) : expert.Act(*env);
        REQUIRE(action.ok());
        step = env->Step(*action, nullptr);
        REQUIRE(step.ok());
      }
      if (step->car.collided_with.rfind(kStalledCarNamePrefix, 0) == 0) {
        ++(blind ? blind_hits : expert_hits);
      }
    }
  }
  CHECK(blind_hits >= kEpisodes / 2);
  CHECK(expert_hits == 0);
}

}  // namespace convoy::sim
