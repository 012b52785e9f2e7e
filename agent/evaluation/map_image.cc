#include "agent/evaluation/map_image.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "simulator_bridge/world/png.h"

namespace convoy::agent {
namespace {

constexpr double kMarginM = 20.0;
constexpr double kRoadWidthM = 9.0;

}  // namespace

void MapPicture::Put(int px, int py, const uint8_t color[3]) {
  if (px < 0 || py < 0 || px >= width || py >= height) return;
  uint8_t* p = &rgb[(static_cast<size_t>(py) * width + px) * 3];
  p[0] = color[0];
  p[1] = color[1];
  p[2] = color[2];
}

void MapPicture::ToPixel(double x, double y, double* px, double* py) const {
  *px = (y - min_y) * scale;
  *py = height - 1 - (x - min_x) * scale;
}

void MapPicture::Line(double x1, double y1, double x2, double y2, double width_m,
                      const uint8_t color[3]) {
  double ax, ay, bx, by;
  ToPixel(x1, y1, &ax, &ay);
  ToPixel(x2, y2, &bx, &by);
  const double length = std::hypot(bx - ax, by - ay);
  const int steps = std::max(1, static_cast<int>(length * 2));
  const int radius = std::max(0, static_cast<int>(width_m * scale / 2));
  for (int i = 0; i <= steps; ++i) {
    const double t = static_cast<double>(i) / steps;
    const int cx = static_cast<int>(std::lround(ax + t * (bx - ax)));
    const int cy = static_cast<int>(std::lround(ay + t * (by - ay)));
    for (int dy = -radius; dy <= radius; ++dy) {
      for (int dx = -radius; dx <= radius; ++dx) {
        if (dx * dx + dy * dy <= radius * radius) Put(cx + dx, cy + dy, color);
      }
    }
  }
}

MapPicture DrawMap(const sim::RoadMap& map, double pixels_per_metre) {
  double min_x = 1e18, min_y = 1e18, max_x = -1e18, max_y = -1e18;
  for (const sim::Segment& s : map.roads()) {
    for (const sim::Vec2& p : {s.a, s.b}) {
      min_x = std::min(min_x, p.x);
      max_x = std::max(max_x, p.x);
      min_y = std::min(min_y, p.y);
      max_y = std::max(max_y, p.y);
    }
  }
  MapPicture canvas;
  canvas.scale = pixels_per_metre;
  canvas.min_x = min_x - kMarginM;
  canvas.min_y = min_y - kMarginM;
  canvas.width = static_cast<int>((max_y - min_y + 2 * kMarginM) * pixels_per_metre) + 1;
  canvas.height = static_cast<int>((max_x - min_x + 2 * kMarginM) * pixels_per_metre) + 1;
  canvas.rgb.assign(static_cast<size_t>(canvas.width) * canvas.height * 3, 0);
  const uint8_t grass[3] = {70, 120, 60}, road[3] = {90, 90, 90}, centre[3] = {220, 200, 60},
                ring_intersection[3] = {245, 245, 245}, ring_corner[3] = {140, 200, 250};
  for (size_t i = 0; i < canvas.rgb.size(); i += 3) std::copy(grass, grass + 3, &canvas.rgb[i]);
  for (const sim::Segment& s : map.roads())
    canvas.Line(s.a.x, s.a.y, s.b.x, s.b.y, kRoadWidthM, road);
  for (const sim::Segment& s : map.center_lines())
    canvas.Line(s.a.x, s.a.y, s.b.x, s.b.y, 0.3, centre);
  for (const sim::Junction& j : map.junctions()) {
    const uint8_t* ring = j.kind == sim::RoadPlace::kIntersection ? ring_intersection : ring_corner;
    const int steps =
        static_cast<int>(2 * M_PI * sim::RoadMap::kJunctionRadiusM * pixels_per_metre * 2);
    for (int i = 0; i < steps; ++i) {
      const double angle = 2 * M_PI * i / steps;
      double px, py;
      canvas.ToPixel(j.position.x + sim::RoadMap::kJunctionRadiusM * std::cos(angle),
                     j.position.y + sim::RoadMap::kJunctionRadiusM * std::sin(angle), &px, &py);
      canvas.Put(static_cast<int>(std::lround(px)), static_cast<int>(std::lround(py)), ring);
    }
  }
  return canvas;
}

absl::Status WriteEpisodeMap(const std::string& path, const sim::RoadMap& map,
                             const EvalSummary& summary, double pixels_per_metre) {
  MapPicture canvas = DrawMap(map, pixels_per_metre);
  const uint8_t crash[3] = {230, 30, 30}, stopped[3] = {250, 150, 20},
                ring_intersection[3] = {245, 245, 245};
  for (size_t e = 0; e < summary.episodes.size(); ++e) {
    const EpisodeRecord& episode = summary.episodes[e];
    // Distinct hues around the colour wheel, bright enough to stand out on grey.
    const double hue = 6.0 * e / std::max<size_t>(1, summary.episodes.size());
    const uint8_t color[3] = {
        static_cast<uint8_t>(80 + 175 * std::clamp(std::fabs(hue - 3) - 1, 0.0, 1.0)),
        static_cast<uint8_t>(80 + 175 * std::clamp(2 - std::fabs(hue - 2), 0.0, 1.0)),
        static_cast<uint8_t>(80 + 175 * std::clamp(2 - std::fabs(hue - 4), 0.0, 1.0))};
    for (size_t i = 1; i < episode.path.size(); ++i) {
      canvas.Line(episode.path[i - 1].first, episode.path[i - 1].second, episode.path[i].first,
                  episode.path[i].second, 0.8, color);
    }
  }
  // Ends on top of every path, so a later episode's line does not hide an earlier one's end.
  for (const EpisodeRecord& episode : summary.episodes) {
    if (episode.completed || episode.path.empty()) continue;
    double px, py;
    canvas.ToPixel(episode.path.back().first, episode.path.back().second, &px, &py);
    const uint8_t* color = episode.collided ? crash : stopped;
    for (int d = -6; d <= 6; ++d) {
      for (int w = -1; w <= 1; ++w) {
        canvas.Put(static_cast<int>(px) + d, static_cast<int>(py) + d + w, color);
        canvas.Put(static_cast<int>(px) + d, static_cast<int>(py) - d + w, color);
      }
    }
    if (episode.end_place != sim::RoadPlace::kStraight) {
      for (int dy = -1; dy <= 1; ++dy) {
        for (int dx = -1; dx <= 1; ++dx) {
          canvas.Put(static_cast<int>(px) + dx, static_cast<int>(py) + dy, ring_intersection);
        }
      }
    }
  }
  return sim::WritePng(path, canvas.rgb.data(), canvas.width, canvas.height, sim::PixelOrder::kRgb);
}

}  // namespace convoy::agent
