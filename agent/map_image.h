// A top-down PNG of the map with evaluation episodes drawn on it: roads grey, lane centre lines yellow, each
// episode's path in its own colour. The junction zones (RoadMap::kJunctionRadiusM) are ringed, white for an
// intersection and light blue for a corner. Where an episode ended before the time limit is a cross: red
// for a collision, orange for leaving the centre line or stopping; a white square inside the cross marks an
// end inside a junction zone.
#ifndef CONVOY_AGENT_MAP_IMAGE_H_
#define CONVOY_AGENT_MAP_IMAGE_H_

#include <string>

#include "absl/status/status.h"
#include "agent/evaluation.h"
#include "simulator_bridge/road_map.h"

namespace convoy {

// `pixels_per_metre` sets the scale; the image covers the roads' bounding box plus a margin.
absl::Status WriteEpisodeMap(const std::string& path, const RoadMap& map, const EvalSummary& summary,
                             double pixels_per_metre = 2.0);

}  // namespace convoy

#endif  // CONVOY_AGENT_MAP_IMAGE_H_
