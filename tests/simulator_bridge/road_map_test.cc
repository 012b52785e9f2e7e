#include "simulator_bridge/road_map.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>

#include "test_world.h"

namespace convoy {
namespace {

TEST_CASE("the Neighborhood map loads with the cookbook's unit conversion", "[road_map]") {
  absl::StatusOr<RoadMap> map = RoadMap::Load(TestMapDir());
  REQUIRE(map.ok());
  CHECK(map->roads().size() == 15);
  CHECK(map->center_lines().size() == 43);
  // First road line: (-12560, -14300) cm -> ((-12560 - 12961.722656) / 100, (-14300 - 6660.329102)
  // / 100).
  CHECK(map->roads()[0].a.x == Approx(-255.21722656).epsilon(1e-9));
  CHECK(map->roads()[0].a.y == Approx(-209.60329102).epsilon(1e-9));
  CHECK(map->roads()[0].b.x == Approx(-127.91722656).epsilon(1e-9));
}

TEST_CASE("distance to the centre line is zero on it and grows perpendicular to it", "[road_map]") {
  absl::StatusOr<RoadMap> map = RoadMap::Load(TestMapDir());
  REQUIRE(map.ok());
  // Midpoint of the first centre-line segment (-251.2 .. -132.2, y = -209.6).
  const Vec2 on{-190.0, -209.60329102};
  CHECK(map->DistanceToCenterLine(on) == Approx(0.0).margin(1e-9));
  CHECK(map->DistanceToCenterLine({-190.0, -209.60329102 + 2.0}) == Approx(2.0));
  CHECK(map->DistanceToCenterLine({-190.0, -209.60329102 - 3.0}) == Approx(3.0));
  CHECK(std::exp(-1.2 * map->DistanceToCenterLine({-190.0, -208.60329102})) ==
        Approx(std::exp(-1.2)));
}

TEST_CASE("distance to a segment clamps at its ends", "[road_map]") {
  const Segment s{{0.0, 0.0}, {10.0, 0.0}};
  CHECK(DistanceToSegment({5.0, 3.0}, s) == Approx(3.0));
  CHECK(DistanceToSegment({-3.0, 4.0}, s) == Approx(5.0));
  CHECK(DistanceToSegment({13.0, -4.0}, s) == Approx(5.0));
}

TEST_CASE("malformed map lines are rejected with file and line", "[road_map]") {
  absl::StatusOr<RoadMap> bad = RoadMap::Parse("0,0\t100,0\n1,2\tx,4\n", "0 0 1 0\n");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("road_lines.txt:2") != absl::string_view::npos);
  CHECK_FALSE(RoadMap::Parse("", "0 0 1 0\n").ok());
  CHECK(absl::IsNotFound(RoadMap::Load("/nonexistent").status()));
}

TEST_CASE("the default map is found through CONVOY_MAP_DIR", "[road_map]") {
  setenv("CONVOY_MAP_DIR", TestMapDir().c_str(), 1);
  absl::StatusOr<std::string> dir = FindDefaultMapDir();
  unsetenv("CONVOY_MAP_DIR");
  REQUIRE(dir.ok());
  CHECK(*dir == TestMapDir());
  CHECK(FindDefaultMapDir().ok());  // from the executable's parents or the source tree
}

}  // namespace
}  // namespace convoy
