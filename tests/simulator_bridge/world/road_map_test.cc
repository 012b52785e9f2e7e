#include "simulator_bridge/world/road_map.h"

#include <cmath>
#include <cstdlib>
#include <string>

#include "tests/catch.h"
#include "tests/simulator_bridge/world/test_world.h"

namespace convoy::sim {
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

TEST_CASE("the Neighborhood's junctions are its 7 intersections and 4 corners", "[road_map]") {
  absl::StatusOr<RoadMap> map = RoadMap::Load(TestMapDir());
  REQUIRE(map.ok());
  int intersections = 0, corners = 0;
  for (const Junction& j : map->junctions()) {
    (j.kind == RoadPlace::kIntersection ? intersections : corners) += 1;
  }
  CHECK(intersections == 7);
  CHECK(corners == 4);
  // (170, -1600) cm, where four roads meet; (-12560, -14300) cm, the grid's south-west corner.
  const Vec2 crossing{(170 - 12961.722656) / 100, (-1600 - 6660.329102) / 100};
  const Vec2 corner{(-12560 - 12961.722656) / 100, (-14300 - 6660.329102) / 100};
  CHECK(map->PlaceOf(crossing) == RoadPlace::kIntersection);
  CHECK(map->PlaceOf({crossing.x + 11.0, crossing.y}) == RoadPlace::kIntersection);
  CHECK(map->PlaceOf({crossing.x + 13.0, crossing.y}) == RoadPlace::kStraight);
  CHECK(map->PlaceOf(corner) == RoadPlace::kCorner);
  CHECK(map->PlaceOf({corner.x + 5.0, corner.y + 5.0}) == RoadPlace::kCorner);
  CHECK(map->PlaceOf({corner.x + 60.0, corner.y}) == RoadPlace::kStraight);  // On the western road.
  CHECK(std::string(RoadPlaceName(RoadPlace::kIntersection)) == "intersection");
}

TEST_CASE("a bend is a corner only past 30 degrees, and three roads make an intersection",
          "[road_map]") {
  // Centimetres, origin 0, junctions 100 m apart: a 45-degree bend at (10000, 0), a 10-degree one at
  // (0, 10000), a T at (0, 30000), and a dead end at (-10000, -10000) that is no junction.
  const std::string roads =
      "0,0\t10000,0\n10000,0\t17071,7071\n"      // 45 degrees off straight at (10000, 0).
      "0,0\t0,10000\n0,10000\t1736,19848\n"      // 10 degrees off straight at (0, 10000).
      "0,20000\t0,30000\n0,30000\t0,40000\n0,30000\t10000,30000\n"  // A T at (0, 30000).
      "-10000,-10000\t-5000,-10000\n";
  RoadMapOptions options;
  options.origin_x_cm = 0;
  options.origin_y_cm = 0;
  absl::StatusOr<RoadMap> map = RoadMap::Parse(roads, "0 0 1 1\n", options);
  REQUIRE(map.ok());
  CHECK(map->PlaceOf({100, 0}) == RoadPlace::kCorner);
  CHECK(map->PlaceOf({0, 100}) == RoadPlace::kStraight);
  CHECK(map->PlaceOf({0, 300}) == RoadPlace::kIntersection);
  CHECK(map->PlaceOf({-100, -100}) == RoadPlace::kStraight);
  // (0, 0) joins the first two roads at a right angle: a corner too.
  CHECK(map->PlaceOf({0, 0}) == RoadPlace::kCorner);
  CHECK(map->junctions().size() == 3);
}

}  // namespace
}  // namespace convoy::sim
