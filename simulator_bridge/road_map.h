// A road network as the cookbook describes one: road centre segments (road_lines.txt, Unreal
// centimetres) and lane centre-line segments (reward_points.txt, metres) that the reward measures
// distance to. Immutable after loading; safe to share between threads.
#ifndef CONVOY_SIMULATOR_BRIDGE_ROAD_MAP_H_
#define CONVOY_SIMULATOR_BRIDGE_ROAD_MAP_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace convoy {

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

 private:
  std::vector<Segment> roads_;
  std::vector<Segment> center_lines_;
};

// The directory of the bundled Neighborhood map, found in order from: the CONVOY_MAP_DIR
// environment variable; simulator_bridge/maps/neighborhood under the running executable's directory
// or any of its parents; the source tree the library was built from. NOT_FOUND lists where it
// looked.
absl::StatusOr<std::string> FindDefaultMapDir();

}  // namespace convoy

#endif  // CONVOY_SIMULATOR_BRIDGE_ROAD_MAP_H_
