// A road network as the cookbook describes one: road centre segments (road_lines.txt, Unreal
// centimetres) and lane centre-line segments (reward_points.txt, metres) that the reward measures
// distance to. Immutable after loading; safe to share between threads.
#ifndef CONVOY_SIMULATOR_BRIDGE_WORLD_ROAD_MAP_H_
#define CONVOY_SIMULATOR_BRIDGE_WORLD_ROAD_MAP_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace convoy::sim {

struct Vec2 {
  double x = 0.0;
  double y = 0.0;
};

struct Segment {
  Vec2 a;
  Vec2 b;
};

// Distance from p to the closed segment s.
double DistanceToSegment(const Vec2& p, const Segment& s);

// What a place on the road network is, as far as driving it goes.
enum class RoadPlace { kStraight = 0, kCorner, kIntersection };
inline constexpr int kRoadPlaces = 3;
// "straight", "corner", "intersection".
const char* RoadPlaceName(RoadPlace place);

// A point where road centre lines meet: three or more roads make an intersection, two that meet at an
// angle (more than 30 degrees off straight on) a corner.
struct Junction {
  Vec2 position;
  RoadPlace kind = RoadPlace::kIntersection;
};

struct RoadMapOptions {
  // The cookbook's conversion of road_lines.txt: metres = (p_cm - origin_cm) / 100.
  double origin_x_cm = 12961.722656;
  double origin_y_cm = 6660.329102;
};

class RoadMap {
 public:
  // Reads `dir`/road_lines.txt ("x1,y1<TAB>x2,y2" per line, centimetres) and
  // `dir`/reward_points.txt ("x1 y1 x2 y2" per line, tab or space separated, metres).
  // INVALID_ARGUMENT names the file and line of any malformed line; NOT_FOUND a missing file.
  static absl::StatusOr<RoadMap> Load(const std::string& dir, const RoadMapOptions& options = {});

  // From text already in memory (same formats).
  static absl::StatusOr<RoadMap> Parse(absl::string_view road_lines,
                                       absl::string_view reward_points,
                                       const RoadMapOptions& options = {});

  // Road centre segments, metres.
  const std::vector<Segment>& roads() const { return roads_; }
  // Lane centre-line segments, metres.
  const std::vector<Segment>& center_lines() const { return center_lines_; }

  // Distance from p to the nearest lane centre-line segment (the cookbook's reward distance).
  double DistanceToCenterLine(const Vec2& p) const;

  // How far from a junction's centre a place still counts as the junction: its 9 m wide roads' crossing and
  // the turn into and out of it.
  static constexpr double kJunctionRadiusM = 12.0;
  // The corners and intersections of the roads (ends that meet within 1 cm), in the order first met.
  const std::vector<Junction>& junctions() const { return junctions_; }
  // Where p is: the kind of the nearest junction within `radius` metres, else a straight.
  RoadPlace PlaceOf(const Vec2& p, double radius = kJunctionRadiusM) const;

 private:
  void FindJunctions();

  std::vector<Segment> roads_;
  std::vector<Segment> center_lines_;
  std::vector<Junction> junctions_;
};

// The directory of the bundled Neighborhood map, found in order from: the CONVOY_MAP_DIR
// environment variable; simulator_bridge/maps/neighborhood under the running executable's directory
// or any of its parents; the source tree the library was built from. NOT_FOUND lists where it
// looked.
absl::StatusOr<std::string> FindDefaultMapDir();

}  // namespace convoy::sim

#endif  // CONVOY_SIMULATOR_BRIDGE_WORLD_ROAD_MAP_H_
