#include "simulator_bridge/world/road_map.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/support/files.h"
#include "common/support/status_macros.h"

namespace convoy::sim {
namespace {

// Splits on tabs, spaces and commas, dropping empty fields.
absl::StatusOr<std::vector<double>> ParseNumbers(absl::string_view line) {
  std::vector<double> numbers;
  for (absl::string_view field : absl::StrSplit(line, absl::ByAnyChar(" \t,"), absl::SkipEmpty())) {
    double value;
    if (!absl::SimpleAtod(field, &value) || !std::isfinite(value)) {
      return absl::InvalidArgumentError(absl::StrCat("not a number: '", field, "'"));
    }
    numbers.push_back(value);
  }
  return numbers;
}

absl::StatusOr<std::vector<Segment>> ParseSegments(absl::string_view text, absl::string_view name,
                                                   double scale, double ox, double oy) {
  std::vector<Segment> segments;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    absl::StatusOr<std::vector<double>> numbers = ParseNumbers(line);
    if (!numbers.ok() || numbers->size() != 4) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ":", line_number, ": expected 4 numbers (x1 y1 x2 y2), got '", line,
                       "'", numbers.ok() ? "" : absl::StrCat(": ", numbers.status().message())));
    }
    const std::vector<double>& n = *numbers;
    Segment s{{(n[0] - ox) * scale, (n[1] - oy) * scale},
              {(n[2] - ox) * scale, (n[3] - oy) * scale}};
    segments.push_back(s);
  }
  if (segments.empty()) return absl::InvalidArgumentError(absl::StrCat(name, ": no segments"));
  return segments;
}

}  // namespace

double DistanceToSegment(const Vec2& p, const Segment& s) {
  const double dx = s.b.x - s.a.x;
  const double dy = s.b.y - s.a.y;
  const double len2 = dx * dx + dy * dy;
  double t = 0.0;
  if (len2 > 0.0) t = std::clamp(((p.x - s.a.x) * dx + (p.y - s.a.y) * dy) / len2, 0.0, 1.0);
  const double ex = s.a.x + t * dx - p.x;
  const double ey = s.a.y + t * dy - p.y;
  return std::sqrt(ex * ex + ey * ey);
}

absl::StatusOr<RoadMap> RoadMap::Parse(absl::string_view road_lines,
                                       absl::string_view reward_points,
                                       const RoadMapOptions& options) {
  RoadMap map;
  CONVOY_ASSIGN_OR_RETURN(
      std::vector<Segment> roads,
      ParseSegments(road_lines, "road_lines.txt", 0.01, options.origin_x_cm, options.origin_y_cm));
  CONVOY_ASSIGN_OR_RETURN(std::vector<Segment> lines,
                          ParseSegments(reward_points, "reward_points.txt", 1.0, 0.0, 0.0));
  map.roads_ = std::move(roads);
  map.center_lines_ = std::move(lines);
  map.FindJunctions();
  return map;
}

const char* RoadPlaceName(RoadPlace place) {
  switch (place) {
    case RoadPlace::kStraight:
      return "straight";
    case RoadPlace::kCorner:
      return "corner";
    case RoadPlace::kIntersection:
      return "intersection";
  }
  return "unknown";
}

void RoadMap::FindJunctions() {
  constexpr double kSameEndM = 0.01;
  constexpr double kCornerCos = 0.866;  // cos 30 degrees: straighter than that is not a corner.
  struct End {
    Vec2 position;
    std::vector<Vec2> away;  // Unit directions of the roads leaving it.
  };
  std::vector<End> ends;
  auto add = [&](const Vec2& at, const Vec2& other) {
    const double length = std::hypot(other.x - at.x, other.y - at.y);
    if (length == 0) return;
    const Vec2 away{(other.x - at.x) / length, (other.y - at.y) / length};
    for (End& e : ends) {
      if (std::hypot(e.position.x - at.x, e.position.y - at.y) <= kSameEndM) {
        e.away.push_back(away);
        return;
      }
    }
    ends.push_back({at, {away}});
  };
  for (const Segment& s : roads_) {
    add(s.a, s.b);
    add(s.b, s.a);
  }
  junctions_.clear();
  for (const End& e : ends) {
    if (e.away.size() >= 3) {
      junctions_.push_back({e.position, RoadPlace::kIntersection});
    } else if (e.away.size() == 2) {
      // Straight on, the two roads leave in opposite directions (cosine -1).
      const double cosine = e.away[0].x * e.away[1].x + e.away[0].y * e.away[1].y;
      if (cosine > -kCornerCos) junctions_.push_back({e.position, RoadPlace::kCorner});
    }
  }
}

RoadPlace RoadMap::PlaceOf(const Vec2& p, double radius) const {
  RoadPlace place = RoadPlace::kStraight;
  double nearest = radius;
  for (const Junction& j : junctions_) {
    const double d = std::hypot(j.position.x - p.x, j.position.y - p.y);
    if (d <= nearest) {
      nearest = d;
      place = j.kind;
    }
  }
  return place;
}

absl::StatusOr<RoadMap> RoadMap::Load(const std::string& dir, const RoadMapOptions& options) {
  CONVOY_ASSIGN_OR_RETURN(std::string roads, ReadFileToString(dir + "/road_lines.txt"));
  CONVOY_ASSIGN_OR_RETURN(std::string rewards, ReadFileToString(dir + "/reward_points.txt"));
  absl::StatusOr<RoadMap> map = Parse(roads, rewards, options);
  if (!map.ok()) {
    return absl::Status(map.status().code(), absl::StrCat(dir, "/", map.status().message()));
  }
  return map;
}

double RoadMap::DistanceToCenterLine(const Vec2& p) const {
  double best = std::numeric_limits<double>::infinity();
  for (const Segment& s : center_lines_) best = std::min(best, DistanceToSegment(p, s));
  return best;
}

absl::StatusOr<std::string> FindDefaultMapDir() {
  constexpr char kRelative[] = "simulator_bridge/maps/neighborhood";
  std::vector<std::string> tried;
  auto has_map = [&tried](const std::string& dir) {
    tried.push_back(dir);
    return access((dir + "/road_lines.txt").c_str(), R_OK) == 0 &&
           access((dir + "/reward_points.txt").c_str(), R_OK) == 0;
  };
  if (const char* env = std::getenv("CONVOY_MAP_DIR"); env != nullptr && env[0] != '\0') {
    if (has_map(env)) return std::string(env);
  }
  char exe[4096];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n > 0) {
    std::string dir(exe, static_cast<size_t>(n));
    for (int depth = 0; depth < 6; ++depth) {
      const size_t slash = dir.find_last_of('/');
      if (slash == std::string::npos || slash == 0) break;
      dir.resize(slash);
      if (has_map(absl::StrCat(dir, "/", kRelative))) return absl::StrCat(dir, "/", kRelative);
      if (has_map(absl::StrCat(dir, "/share/convoy/maps/neighborhood"))) {
        return absl::StrCat(dir, "/share/convoy/maps/neighborhood");
      }
    }
  }
#ifdef CONVOY_SOURCE_DIR
  if (has_map(absl::StrCat(CONVOY_SOURCE_DIR, "/", kRelative))) {
    return absl::StrCat(CONVOY_SOURCE_DIR, "/", kRelative);
  }
#endif
  return absl::NotFoundError(absl::StrCat("no map (road_lines.txt, reward_points.txt) in ",
                                          absl::StrJoin(tried, ", "), "; set CONVOY_MAP_DIR"));
}

}  // namespace convoy::sim
