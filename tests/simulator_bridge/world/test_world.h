// The bundled Neighborhood world, built once per test binary and shared (it is immutable).
#ifndef CONVOY_TESTS_SIMULATOR_BRIDGE_WORLD_TEST_WORLD_H_
#define CONVOY_TESTS_SIMULATOR_BRIDGE_WORLD_TEST_WORLD_H_

#include <memory>
#include <string>

#include "simulator_bridge/world/car_sim.h"
#include "simulator_bridge/world/road_map.h"
#include "simulator_bridge/world/world.h"
#include "tests/catch.h"

namespace convoy::sim {

inline std::string TestMapDir() {
  return std::string(CONVOY_SOURCE_DIR) + "/simulator_bridge/maps/neighborhood";
}

inline std::shared_ptr<const World> TestWorld() {
  static const std::shared_ptr<const World> world = [] {
    absl::StatusOr<RoadMap> map = RoadMap::Load(TestMapDir());
    REQUIRE(map.ok());
    absl::StatusOr<std::shared_ptr<const World>> w = World::Create(*std::move(map));
    REQUIRE(w.ok());
    return *w;
  }();
  return world;
}

// A pose on the ground at (x, y), heading `yaw`.
inline Pose PoseAt(double x, double y, double yaw) {
  Pose pose;
  pose.position = {static_cast<float>(x), static_cast<float>(y), 0.0f};
  pose.orientation = QuaternionFromYaw(yaw);
  return pose;
}

}  // namespace convoy::sim

#endif  // CONVOY_TESTS_SIMULATOR_BRIDGE_WORLD_TEST_WORLD_H_
