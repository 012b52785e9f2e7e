// The static world an EmbeddedSim car drives in: roads of a given width built around a RoadMap's
// road segments, with lane markings, curbs, sidewalks and grass, plus the surface texture the
// renderer samples. Immutable after Create(); share one World between any number of simulators and
// threads through the shared_ptr.
#ifndef CONVOY_SIMULATOR_BRIDGE_WORLD_WORLD_H_
#define CONVOY_SIMULATOR_BRIDGE_WORLD_WORLD_H_

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "simulator_bridge/world/road_map.h"

namespace convoy::sim {

struct WorldOptions {
  double road_half_width_m = 4.5;  // curb to road centre
  double curb_width_m = 0.3;
  double sidewalk_width_m = 2.0;
  double center_line_width_m = 0.15;  // dashed, yellow, on the road centre
  double center_dash_m = 3.0;
  double center_gap_m = 6.0;
  double edge_line_width_m = 0.15;  // solid, white
  double edge_line_inset_m = 0.3;   // from the curb
  double texel_m = 0.1;             // surface texture resolution
  double margin_m = 60.0;           // textured grass beyond the outermost roads
};

enum class Material : uint8_t {
  kGrass = 0,
  kSidewalk = 1,
  kCurb = 2,
  kAsphalt = 3,
  kWhiteLine = 4,
  kYellowLine = 5,
};
inline constexpr int kNumMaterials = 6;
// Texture ids are material * kMaterialVariants + variant; variants add surface noise.
inline constexpr int kMaterialVariants = 4;
inline constexpr int kNumTextureIds = kNumMaterials * kMaterialVariants;

// The names a collision reports (CollisionInfo::object_name) for what the car hit: a curb, or a
// parked car (its name: this prefix and its id).
inline constexpr char kCurbObjectName[] = "Curb";
inline constexpr char kParkedCarNamePrefix[] = "ParkedCar_";
// A stalled car (broken down on the road centre line, in the way): this prefix and its number;
// its object id is that number plus kStalledCarIdBase.
inline constexpr char kStalledCarNamePrefix[] = "StalledCar_";
inline constexpr int32_t kStalledCarIdBase = 90000;

// A static box standing on the ground (a parked car).
struct Obstacle {
  std::string name;
  int32_t id = 0;
  Vec2 center;
  double yaw = 0.0;
  double half_length = 2.3;
  double half_width = 0.9;
  double height = 1.5;
  uint8_t bgr[3] = {40, 40, 160};
};

inline constexpr double kStalledCarJunctionM = 35.0;
inline constexpr double kStalledCarSpacingM = 40.0;
inline constexpr double kStalledCarClearM = 25.0;

// Separating-axis overlap of two rectangles given by centre, yaw, half length and half width; on
// overlap, the axis of least penetration pointing from b towards a, and the depth.
bool RectanglesOverlap(const Vec2& ca, double yaw_a, double la, double wa, const Vec2& cb,
                       double yaw_b, double lb, double wb, Vec2* normal, double* depth);
bool ObstaclesOverlap(const Obstacle& a, const Obstacle& b);

class World {
 public:
  static absl::StatusOr<std::shared_ptr<const World>> Create(RoadMap map,
                                                             const WorldOptions& options = {});
  // The bundled Neighborhood map from FindDefaultMapDir().
  static absl::StatusOr<std::shared_ptr<const World>> CreateDefault(
      const WorldOptions& options = {});

  const RoadMap& map() const { return map_; }
  const WorldOptions& options() const { return options_; }

  // True on the road surface (between the curbs, junctions included).
  bool IsDrivable(const Vec2& p) const;
  // Nearest point of the road surface to p and the unit normal from p towards it (meaningful for p
  // off the road; for p on the road, point == p and normal is zero). Returns the distance.
  double NearestDrivable(const Vec2& p, Vec2* point, Vec2* normal) const;
  // The surface material at p, computed from the geometry (the texture holds the same, sampled).
  Material MaterialAt(const Vec2& p) const;

  // Places `count` parked cars along the curbs, deterministically for `seed`, not overlapping one
  // another or junctions. May return fewer when the roads are full.
  std::vector<Obstacle> PlaceParkedCars(int count, uint64_t seed) const;
  // Draws a place for a stalled car on a road's centre line from `rng`: at least
  // kStalledCarJunctionM from a road end, kStalledCarSpacingM from the other stalled cars in
  // `others`, kStalledCarClearM from every other car there (room to swerve into, on either side)
  // and `radius` from `avoid`. False when the draw was not free (draw again).
  bool PlaceStalledCar(std::mt19937_64& rng, const std::vector<Obstacle>& others, const Vec2& avoid,
                       double radius, Obstacle* out) const;

  // Texture access for the renderer: ids in 8x8-texel tiles (64 bytes, one cache line each), so
  // nearby texels share a cache line whatever direction a camera row runs in.
  int texture_width() const { return tex_w_; }
  int texture_height() const { return tex_h_; }
  double texture_x0() const { return tex_x0_; }
  double texture_y0() const { return tex_y0_; }
  uint8_t TexelId(int tx, int ty) const {
    return texture_[((static_cast<size_t>(ty >> 3) * tiles_x_ + (tx >> 3)) << 6) + ((ty & 7) << 3) +
                    (tx & 7)];
  }
  const uint8_t* texture_data() const { return texture_.data(); }
  int texture_tiles_x() const { return tiles_x_; }

 private:
  struct RoadRect {
    Vec2 a;
    Vec2 dir;     // unit, a -> b
    Vec2 normal;  // unit, dir rotated +90 degrees
    double length = 0.0;
  };

  World(RoadMap map, const WorldOptions& options);
  void BuildTexture();

  RoadMap map_;
  WorldOptions options_;
  std::vector<RoadRect> rects_;
  int tex_w_ = 0;
  int tex_h_ = 0;
  int tiles_x_ = 0;
  double tex_x0_ = 0.0;
  double tex_y0_ = 0.0;
  std::vector<uint8_t> texture_;
};

}  // namespace convoy::sim

#endif  // CONVOY_SIMULATOR_BRIDGE_WORLD_WORLD_H_
