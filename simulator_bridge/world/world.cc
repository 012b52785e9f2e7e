#include "simulator_bridge/world/world.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/support/status_macros.h"

namespace convoy::sim {
namespace {

constexpr int kTile = 8;

uint32_t HashCell(int x, int y) {
  uint64_t h = (static_cast<uint64_t>(static_cast<uint32_t>(x)) << 32) ^ static_cast<uint32_t>(y);
  h += 0x9e3779b97f4a7c15ULL;
  h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ULL;
  h = (h ^ (h >> 27)) * 0x94d049bb133111ebULL;
  return static_cast<uint32_t>(h ^ (h >> 31));
}

// Uniform in [0, 1) from a 64-bit engine, identical on every platform.
double Uniform(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

}  // namespace

bool RectanglesOverlap(const Vec2& ca, double yaw_a, double la, double wa, const Vec2& cb,
                       double yaw_b, double lb, double wb, Vec2* normal, double* depth) {
  const Vec2 axes[4] = {{std::cos(yaw_a), std::sin(yaw_a)},
                        {-std::sin(yaw_a), std::cos(yaw_a)},
                        {std::cos(yaw_b), std::sin(yaw_b)},
                        {-std::sin(yaw_b), std::cos(yaw_b)}};
  const Vec2 d{ca.x - cb.x, ca.y - cb.y};
  double best = std::numeric_limits<double>::infinity();
  Vec2 best_axis{1.0, 0.0};
  for (const Vec2& axis : axes) {
    const double ra = la * std::abs(axis.x * axes[0].x + axis.y * axes[0].y) +
                      wa * std::abs(axis.x * axes[1].x + axis.y * axes[1].y);
    const double rb = lb * std::abs(axis.x * axes[2].x + axis.y * axes[2].y) +
                      wb * std::abs(axis.x * axes[3].x + axis.y * axes[3].y);
    const double dist = d.x * axis.x + d.y * axis.y;
    const double overlap = ra + rb - std::abs(dist);
    if (overlap <= 0.0) return false;
    if (overlap < best) {
      best = overlap;
      best_axis = dist >= 0.0 ? axis : Vec2{-axis.x, -axis.y};
    }
  }
  *normal = best_axis;
  *depth = best;
  return true;
}

bool ObstaclesOverlap(const Obstacle& a, const Obstacle& b) {
  Vec2 normal;
  double depth;
  return RectanglesOverlap(a.center, a.yaw, a.half_length, a.half_width, b.center, b.yaw,
                           b.half_length, b.half_width, &normal, &depth);
}

absl::StatusOr<std::shared_ptr<const World>> World::Create(RoadMap map,
                                                           const WorldOptions& options) {
  if (!(options.road_half_width_m > 0.5) || !(options.texel_m > 0.01) || options.curb_width_m < 0 ||
      options.sidewalk_width_m < 0 || options.margin_m < 0) {
    return absl::InvalidArgumentError(
        "WorldOptions: road_half_width_m > 0.5, texel_m > 0.01 and "
        "non-negative widths required");
  }
  for (const Segment& s : map.roads()) {
    if (std::hypot(s.b.x - s.a.x, s.b.y - s.a.y) < 1e-6) {
      return absl::InvalidArgumentError("road_lines.txt holds a zero-length road segment");
    }
  }
  std::shared_ptr<World> world(new World(std::move(map), options));
  const double extent_x = world->tex_w_ * options.texel_m;
  const double extent_y = world->tex_h_ * options.texel_m;
  if (extent_x * extent_y / (options.texel_m * options.texel_m) > 4.0e8) {
    return absl::InvalidArgumentError(absl::StrCat("map too large for a ", options.texel_m,
                                                   " m texture; raise WorldOptions::texel_m"));
  }
  world->BuildTexture();
  return std::shared_ptr<const World>(std::move(world));
}

absl::StatusOr<std::shared_ptr<const World>> World::CreateDefault(const WorldOptions& options) {
  CONVOY_ASSIGN_OR_RETURN(std::string dir, FindDefaultMapDir());
  CONVOY_ASSIGN_OR_RETURN(RoadMap map, RoadMap::Load(dir));
  return Create(std::move(map), options);
}

World::World(RoadMap map, const WorldOptions& options) : map_(std::move(map)), options_(options) {
  double min_x = std::numeric_limits<double>::infinity(), min_y = min_x;
  double max_x = -min_x, max_y = -min_x;
  for (const Segment& s : map_.roads()) {
    RoadRect r;
    r.a = s.a;
    r.length = std::hypot(s.b.x - s.a.x, s.b.y - s.a.y);
    r.dir = {(s.b.x - s.a.x) / r.length, (s.b.y - s.a.y) / r.length};
    r.normal = {-r.dir.y, r.dir.x};
    rects_.push_back(r);
    for (const Vec2& p : {s.a, s.b}) {
      min_x = std::min(min_x, p.x);
      min_y = std::min(min_y, p.y);
      max_x = std::max(max_x, p.x);
      max_y = std::max(max_y, p.y);
    }
  }
  const double pad = options_.road_half_width_m + options_.margin_m;
  tex_x0_ = min_x - pad;
  tex_y0_ = min_y - pad;
  tex_w_ =
      static_cast<int>(std::ceil((max_x - min_x + 2 * pad) / options_.texel_m / kTile)) * kTile;
  tex_h_ =
      static_cast<int>(std::ceil((max_y - min_y + 2 * pad) / options_.texel_m / kTile)) * kTile;
  tiles_x_ = tex_w_ / kTile;
}

bool World::IsDrivable(const Vec2& p) const {
  const double w = options_.road_half_width_m;
  for (const RoadRect& r : rects_) {
    const double dx = p.x - r.a.x, dy = p.y - r.a.y;
    const double a = dx * r.dir.x + dy * r.dir.y;
    const double l = dx * r.normal.x + dy * r.normal.y;
    if (a >= -w && a <= r.length + w && std::abs(l) <= w) return true;
  }
  return false;
}

double World::NearestDrivable(const Vec2& p, Vec2* point, Vec2* normal) const {
  const double w = options_.road_half_width_m;
  double best = std::numeric_limits<double>::infinity();
  Vec2 best_point = p;
  for (const RoadRect& r : rects_) {
    const double dx = p.x - r.a.x, dy = p.y - r.a.y;
    const double a = std::clamp(dx * r.dir.x + dy * r.dir.y, -w, r.length + w);
    const double l = std::clamp(dx * r.normal.x + dy * r.normal.y, -w, w);
    const Vec2 q{r.a.x + a * r.dir.x + l * r.normal.x, r.a.y + a * r.dir.y + l * r.normal.y};
    const double d = std::hypot(q.x - p.x, q.y - p.y);
    if (d < best) {
      best = d;
      best_point = q;
    }
  }
  if (point != nullptr) *point = best_point;
  if (normal != nullptr) {
    *normal = best > 1e-12 ? Vec2{(best_point.x - p.x) / best, (best_point.y - p.y) / best}
                           : Vec2{0.0, 0.0};
  }
  return best;
}

Material World::MaterialAt(const Vec2& p) const {
  const WorldOptions& o = options_;
  const double w = o.road_half_width_m;
  bool drivable = false;
  bool junction = false;
  Vec2 first_dir{0.0, 0.0};
  double best_abs_l = std::numeric_limits<double>::infinity();
  double best_a = 0.0;
  double best_len = 0.0;
  double outside = std::numeric_limits<double>::infinity();
  for (const RoadRect& r : rects_) {
    const double dx = p.x - r.a.x, dy = p.y - r.a.y;
    const double a = dx * r.dir.x + dy * r.dir.y;
    const double l = dx * r.normal.x + dy * r.normal.y;
    const double da = std::max({-w - a, a - (r.length + w), 0.0});
    const double dl = std::max(std::abs(l) - w, 0.0);
    if (da == 0.0 && dl == 0.0) {
      if (drivable && std::abs(first_dir.x * r.dir.y - first_dir.y * r.dir.x) > 0.1) {
        junction = true;
      }
      if (!drivable) first_dir = r.dir;
      drivable = true;
      if (std::abs(l) < best_abs_l) {
        best_abs_l = std::abs(l);
        best_a = a;
        best_len = r.length;
      }
    } else {
      outside = std::min(outside, da * da + dl * dl);  // squared; the root is taken once below
    }
  }
  if (drivable) {
    if (!junction && best_a >= 0.0 && best_a <= best_len) {
      if (best_abs_l <= 0.5 * o.center_line_width_m &&
          std::fmod(best_a, o.center_dash_m + o.center_gap_m) < o.center_dash_m) {
        return Material::kYellowLine;
      }
      const double edge_outer = w - o.edge_line_inset_m;
      if (best_abs_l <= edge_outer && best_abs_l >= edge_outer - o.edge_line_width_m) {
        return Material::kWhiteLine;
      }
    }
    return Material::kAsphalt;
  }
  outside = std::sqrt(outside);
  if (outside <= o.curb_width_m) return Material::kCurb;
  if (outside <= o.curb_width_m + o.sidewalk_width_m) return Material::kSidewalk;
  return Material::kGrass;
}

void World::BuildTexture() {
  const double t = options_.texel_m;
  const double reach = options_.road_half_width_m + options_.curb_width_m +
                       options_.sidewalk_width_m + kTile * t;  // tile half-diagonal, generously
  const int tiles_y = tex_h_ / kTile;
  texture_.assign(static_cast<size_t>(tex_w_) * tex_h_, 0);
  for (int ty = 0; ty < tiles_y; ++ty) {
    for (int tx = 0; tx < tiles_x_; ++tx) {
      uint8_t* tile = &texture_[(static_cast<size_t>(ty) * tiles_x_ + tx) << 6];
      const Vec2 center{tex_x0_ + (tx + 0.5) * kTile * t, tex_y0_ + (ty + 0.5) * kTile * t};
      bool near_road = false;
      for (const RoadRect& r : rects_) {
        const double dx = center.x - r.a.x, dy = center.y - r.a.y;
        const double a = dx * r.dir.x + dy * r.dir.y;
        const double l = dx * r.normal.x + dy * r.normal.y;
        if (a >= -reach && a <= r.length + reach && std::abs(l) <= reach) {
          near_road = true;
          break;
        }
      }
      for (int y = 0; y < kTile; ++y) {
        for (int x = 0; x < kTile; ++x) {
          const int gx = tx * kTile + x, gy = ty * kTile + y;
          Material m = Material::kGrass;
          if (near_road) m = MaterialAt({tex_x0_ + (gx + 0.5) * t, tex_y0_ + (gy + 0.5) * t});
          // Coarse patches (1.6 m) and fine grain give each surface a texture that shows motion.
          const uint32_t coarse = HashCell(gx >> 4, gy >> 4);
          const uint32_t fine = HashCell(gx, gy);
          const int variant = static_cast<int>(((coarse >> 9) & 2u) | ((fine >> 13) & 1u));
          tile[(y << 3) + x] =
              static_cast<uint8_t>(static_cast<int>(m) * kMaterialVariants + variant);
        }
      }
    }
  }
}

std::vector<Obstacle> World::PlaceParkedCars(int count, uint64_t seed) const {
  std::vector<Obstacle> placed;
  if (count <= 0 || rects_.empty()) return placed;
  std::mt19937_64 rng(seed);
  double total = 0.0;
  for (const RoadRect& r : rects_) total += r.length;
  const double w = options_.road_half_width_m;
  const int max_attempts = 50 * count;
  for (int attempt = 0; attempt < max_attempts && static_cast<int>(placed.size()) < count;
       ++attempt) {
    double pick = Uniform(rng) * total;
    size_t i = 0;
    while (i + 1 < rects_.size() && pick > rects_[i].length) pick -= rects_[i++].length;
    const RoadRect& r = rects_[i];
    Obstacle o;
    // Clear of junctions and of where traffic turns into and out of them (its lanes end 12 m
    // before a junction, and it swings out 15 m either side of a parked car it passes).
    const double margin = 30.0;
    if (r.length <= 2 * margin) continue;
    const double a = margin + Uniform(rng) * (r.length - 2 * margin);
    const double side = Uniform(rng) < 0.5 ? -1.0 : 1.0;
    const double l = side * (w - options_.edge_line_inset_m - o.half_width - 0.2);
    o.center = {r.a.x + a * r.dir.x + l * r.normal.x, r.a.y + a * r.dir.y + l * r.normal.y};
    o.yaw = std::atan2(r.dir.y, r.dir.x) + (Uniform(rng) < 0.5 ? 0.0 : M_PI);
    bool clear = true;
    for (const Obstacle& other : placed) {
      if (std::hypot(other.center.x - o.center.x, other.center.y - o.center.y) <
          2.0 * o.half_length + 3.0) {
        clear = false;
        break;
      }
    }
    if (!clear) continue;
    static constexpr uint8_t kPaint[][3] = {{40, 40, 170}, {170, 90, 30},  {200, 200, 200},
                                            {40, 40, 40},  {60, 140, 200}, {120, 120, 120},
                                            {30, 100, 40}};
    const auto& paint = kPaint[rng() % (sizeof(kPaint) / sizeof(kPaint[0]))];
    std::copy(paint, paint + 3, o.bgr);
    o.id = static_cast<int32_t>(placed.size()) + 1;
    o.name = absl::StrCat(kParkedCarNamePrefix, o.id);
    placed.push_back(o);
  }
  return placed;
}

bool World::PlaceStalledCar(std::mt19937_64& rng, const std::vector<Obstacle>& others,
                            const Vec2& avoid, double radius, Obstacle* out) const {
  double total = 0.0;
  for (const RoadRect& r : rects_) total += r.length;
  if (total <= 0.0) return false;
  double pick = Uniform(rng) * total;
  size_t i = 0;
  while (i + 1 < rects_.size() && pick > rects_[i].length) pick -= rects_[i++].length;
  const RoadRect& r = rects_[i];
  const double margin = kStalledCarJunctionM;
  const double a = margin + Uniform(rng) * std::max(r.length - 2 * margin, 0.0);
  const bool reverse = Uniform(rng) < 0.5;
  if (r.length <= 2 * margin) return false;
  const Vec2 c{r.a.x + a * r.dir.x, r.a.y + a * r.dir.y};
  if (std::hypot(c.x - avoid.x, c.y - avoid.y) < radius) return false;
  for (const Obstacle& o : others) {
    const double clear =
        o.name.rfind(kStalledCarNamePrefix, 0) == 0 ? kStalledCarSpacingM : kStalledCarClearM;
    if (std::hypot(o.center.x - c.x, o.center.y - c.y) < clear) return false;
  }
  out->center = c;
  out->yaw = std::atan2(r.dir.y, r.dir.x) + (reverse ? M_PI : 0.0);
  // Faded paint, so that it reads as no traffic car does.
  static constexpr uint8_t kPaint[][3] = {{90, 110, 120}, {70, 90, 150}, {130, 130, 100}};
  const auto& paint = kPaint[rng() % (sizeof(kPaint) / sizeof(kPaint[0]))];
  std::copy(paint, paint + 3, out->bgr);
  return true;
}

}  // namespace convoy::sim
