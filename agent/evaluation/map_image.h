// A top-down PNG of the map with evaluation episodes drawn on it: roads grey, lane centre lines yellow, each
// episode's path in its own colour. The junction zones (RoadMap::kJunctionRadiusM) are ringed, white for an
// intersection and light blue for a corner. Where an episode ended before the time limit is a cross: red
// for a collision, orange for leaving the centre line or stopping; a white square inside the cross marks an
// end inside a junction zone.
#ifndef CONVOY_AGENT_EVALUATION_MAP_IMAGE_H_
#define CONVOY_AGENT_EVALUATION_MAP_IMAGE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "agent/evaluation/evaluation.h"
#include "simulator_bridge/world/road_map.h"

namespace convoy::agent {

// A top-down RGB picture of a map: world x (north) runs up, y (east) to the right.
struct MapPicture {
  int width = 0;
  int height = 0;
  double scale = 1.0;  // pixels per metre
  double min_x = 0.0;
  double min_y = 0.0;
  std::vector<uint8_t> rgb;

  void Put(int px, int py, const uint8_t color[3]);
  void ToPixel(double x, double y, double* px, double* py) const;
  // A line of `width_m` metres between two world points.
  void Line(double x1, double y1, double x2, double y2, double width_m, const uint8_t color[3]);
};

// The map's roads, lane centre lines and junction rings at `pixels_per_metre`, over the roads'
// bounding box plus a margin.
MapPicture DrawMap(const sim::RoadMap& map, double pixels_per_metre);

// `pixels_per_metre` sets the scale; the image covers the roads' bounding box plus a margin.
absl::Status WriteEpisodeMap(const std::string& path, const sim::RoadMap& map,
                             const EvalSummary& summary, double pixels_per_metre = 2.0);

}  // namespace convoy::agent

#endif  // CONVOY_AGENT_EVALUATION_MAP_IMAGE_H_
