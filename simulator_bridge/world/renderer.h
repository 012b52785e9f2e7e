// Software renderer for EmbeddedSim's first-person camera: textured ground (road, lane markings,
// curbs, sidewalks, grass) with distance fog, a sky gradient and box obstacles, as BGR bytes, plus
// planar or perspective depth. The ground is flat and the camera never rolls, so each image row
// below the horizon is one straight line across the surface texture: rendering costs one texture
// fetch and one palette lookup per pixel (up to 4 across the row where a pixel spans several
// texels, so thin distant lines do not flicker), with no allocation.
#ifndef CONVOY_SIMULATOR_BRIDGE_WORLD_RENDERER_H_
#define CONVOY_SIMULATOR_BRIDGE_WORLD_RENDERER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "simulator_bridge/world/car_sim.h"
#include "simulator_bridge/world/world.h"

namespace convoy::sim {

// A camera mounted on the car, in the car's frame (x forward, y right, z down, metres, from the
// body centre on the ground). Defaults follow AirSim's scene camera: 256x144, 90 degree horizontal
// field of view, square pixels.
struct CameraOptions {
  int width = 256;
  int height = 144;
  double fov_deg = 90.0;
  double x_m = 1.6;  // front of the cabin
  double y_m = 0.0;
  double z_m = -1.3;              // 1.3 m above the ground
  double pitch_deg = 0.0;         // positive looks up
  double fog_distance_m = 220.0;  // e-folding distance of the haze
  double far_m = 1000.0;          // ground beyond this is drawn as haze; sky depth is far_m
};

class Renderer {
 public:
  static absl::StatusOr<std::unique_ptr<Renderer>> Create(std::shared_ptr<const World> world,
                                                          const CameraOptions& options);

  const CameraOptions& options() const { return options_; }

  // Renders the view from a car at (x, y) with heading `yaw`. `bgr` (width*height*3 bytes) and
  // `depth` (width*height floats, metres) may each be null to skip them; `perspective_depth`
  // selects distance along the ray instead of distance along the optical axis. Thread-compatible:
  // one Renderer per thread.
  void Render(double x, double y, double yaw, const std::vector<Obstacle>& obstacles, uint8_t* bgr,
              float* depth, bool perspective_depth);

  // Camera position in the world and its yaw, for ImageResponse.
  void CameraPose(double x, double y, double yaw, Vector3r* position,
                  Quaternionr* orientation) const;

 private:
  struct Row {
    bool ground = false;
    double t = 0.0;    // ray scale: planar depth of this row's ground hit
    double fwd = 0.0;  // horizontal forward component of the ray (per unit planar depth)
    int samples = 1;   // texture samples per pixel across the row (more where texels are small)
  };
  struct Vec3 {
    double x, y, z;
  };

  // The camera of one Render call in the world: its place and axes.
  struct View {
    double fx, fy;        // forward
    double rx, ry;        // right
    double cam_x, cam_y;  // position
    double cp, sp;        // cosine and sine of the pitch
  };
  // A box of a car: the body, or the cabin on top of it (z up is negative, NED).
  struct Box {
    double half_length, half_width, z_bottom, z_top;
    bool cabin;  // its sides are windows
  };

  Renderer(std::shared_ptr<const World> world, const CameraOptions& options);
  View ViewFrom(double x, double y, double yaw) const;
  // The sky, the haze and the textured ground, row by row.
  void RenderGround(const View& view, uint8_t* bgr, float* depth, bool perspective_depth) const;
  // Ground row `v`'s colours into `out` (width * 3 bytes).
  void TextureRow(const View& view, int v, uint8_t* out) const;
  // The obstacles over the ground, far to near.
  void RenderObstacles(const View& view, const std::vector<Obstacle>& obstacles, uint8_t* bgr,
                       float* depth, bool perspective_depth);
  Vec3 ToCamera(const View& view, double wx, double wy, double wz) const;
  // The box's sides that face the camera and its top, shaded and fogged.
  void DrawBox(const View& view, const Obstacle& o, const Box& box, double fog, uint8_t* bgr,
               float* depth, bool perspective_depth);
  void FillPolygon(const Vec3* cam_points, int n, const uint8_t* color, double fog, uint8_t* bgr,
                   float* depth, bool perspective_depth);

  std::shared_ptr<const World> world_;
  CameraOptions options_;
  double focal_ = 0.0;
  double cx_ = 0.0;
  double cy_ = 0.0;
  double height_ = 0.0;
  std::vector<Row> rows_;
  std::vector<uint8_t> row_palette_;  // height * kNumTextureIds * 3, fog applied
  std::vector<uint8_t> row_haze_;     // height * 3: sky or haze colour per row
  int sky_rows_ = 0;                  // rows 0..sky_rows_-1 show no ground at all
  std::vector<uint8_t> sky_block_;    // those rows, pre-rendered
  std::vector<float> ray_norm_;       // width * height: |ray| per pixel, for perspective depth
  std::vector<std::pair<double, int>> order_;  // obstacle draw order scratch
};

}  // namespace convoy::sim

#endif  // CONVOY_SIMULATOR_BRIDGE_WORLD_RENDERER_H_
