#include "simulator_bridge/world/renderer.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/status/status.h"

namespace convoy::sim {
namespace {

constexpr double kNearM = 0.05;
constexpr int kMaxSamples = 4;

// Base colours, B G R, per Material.
constexpr uint8_t kMaterialBgr[kNumMaterials][3] = {
    {52, 128, 74},    // grass
    {168, 172, 176},  // sidewalk
    {205, 208, 210},  // curb
    {74, 76, 80},     // asphalt
    {228, 232, 232},  // white line
    {40, 185, 225},   // yellow line
};
// Variants 0-1 and 2-3 differ by coarse 1.6 m patches, 0-2 and 1-3 by fine grain. Grass gets
// strong patches (mown stripes), paved surfaces a subtle wear pattern.
constexpr double kVariantShade[kNumMaterials][kMaterialVariants] = {
    {0.88, 0.95, 1.05, 1.12},  // grass
    {0.95, 0.99, 1.01, 1.05},  // sidewalk
    {0.97, 1.00, 1.00, 1.03},  // curb
    {0.94, 0.99, 1.01, 1.06},  // asphalt
    {0.97, 1.00, 1.00, 1.03},  // white line
    {0.97, 1.00, 1.00, 1.03},  // yellow line
};
constexpr uint8_t kHorizonBgr[3] = {236, 222, 206};
constexpr uint8_t kZenithBgr[3] = {205, 150, 95};
constexpr double kSun[3] = {-0.35, 0.45, -0.82};  // towards the sun, NED

uint8_t Mix(double a, double b, double f) {
  const double v = a * (1.0 - f) + b * f;
  return static_cast<uint8_t>(std::clamp(std::lround(v), 0L, 255L));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Renderer>> Renderer::Create(std::shared_ptr<const World> world,
                                                           const CameraOptions& options) {
  if (world == nullptr) return absl::InvalidArgumentError("Renderer needs a world");
  if (options.width < 1 || options.height < 1 || options.width > 8192 || options.height > 8192) {
    return absl::InvalidArgumentError("camera width and height must be in [1, 8192]");
  }
  if (!(options.fov_deg > 1.0 && options.fov_deg < 179.0)) {
    return absl::InvalidArgumentError("camera fov_deg must be in (1, 179)");
  }
  if (!(options.z_m < -0.05)) {
    return absl::InvalidArgumentError("camera z_m must be above the ground (negative, NED)");
  }
  if (!(options.far_m > 1.0) || !(options.fog_distance_m > 0.0) ||
      std::abs(options.pitch_deg) >= 89.0) {
    return absl::InvalidArgumentError("camera far_m > 1, fog_distance_m > 0, |pitch_deg| < 89");
  }
  return std::unique_ptr<Renderer>(new Renderer(std::move(world), options));
}

Renderer::Renderer(std::shared_ptr<const World> world, const CameraOptions& options)
    : world_(std::move(world)), options_(options) {
  const int w = options_.width, h = options_.height;
  focal_ = 0.5 * w / std::tan(0.5 * options_.fov_deg * M_PI / 180.0);
  cx_ = 0.5 * w;
  cy_ = 0.5 * h;
  height_ = -options_.z_m;
  const double pitch = options_.pitch_deg * M_PI / 180.0;
  const double cp = std::cos(pitch), sp = std::sin(pitch);
  rows_.resize(h);
  row_palette_.resize(static_cast<size_t>(h) * kNumTextureIds * 3);
  row_haze_.resize(static_cast<size_t>(h) * 3);
  ray_norm_.resize(static_cast<size_t>(w) * h);
  for (int v = 0; v < h; ++v) {
    const double b = (v + 0.5 - cy_) / focal_;
    const double down = b * cp - sp;
    const double fwd = cp + b * sp;
    Row& row = rows_[v];
    if (down > 1e-9 && height_ / down <= options_.far_m) {
      row.ground = true;
      row.t = height_ / down;
      row.fwd = fwd;
      // A pixel spans t / focal metres across the row; sample about once per texel, up to 4.
      const double texels = row.t / focal_ / world_->options().texel_m;
      row.samples = std::clamp(static_cast<int>(std::ceil(texels - 0.25)), 1, kMaxSamples);
    }
    // Sky: blue overhead fading to a pale horizon; the horizon colour is also the haze colour.
    const double elevation = std::atan2(-down, fwd);
    const double s = std::clamp(elevation / 0.7, 0.0, 1.0);
    for (int c = 0; c < 3; ++c) row_haze_[v * 3 + c] = Mix(kHorizonBgr[c], kZenithBgr[c], s);
    if (row.ground) {
      const double distance = row.t * std::sqrt(fwd * fwd + (down * down));
      const double fog = 1.0 - std::exp(-distance / options_.fog_distance_m);
      for (int id = 0; id < kNumTextureIds; ++id) {
        const uint8_t* base = kMaterialBgr[id / kMaterialVariants];
        const double shade = kVariantShade[id / kMaterialVariants][id % kMaterialVariants];
        for (int c = 0; c < 3; ++c) {
          row_palette_[(static_cast<size_t>(v) * kNumTextureIds + id) * 3 + c] =
              Mix(std::min(255.0, base[c] * shade), kHorizonBgr[c], fog);
        }
      }
    }
    for (int u = 0; u < w; ++u) {
      const double a = (u + 0.5 - cx_) / focal_;
      ray_norm_[static_cast<size_t>(v) * w + u] =
          static_cast<float>(std::sqrt(1.0 + a * a + b * b));
    }
  }
  while (sky_rows_ < h && !rows_[sky_rows_].ground) ++sky_rows_;
  sky_block_.resize(static_cast<size_t>(sky_rows_) * w * 3);
  for (int v = 0; v < sky_rows_; ++v) {
    for (int u = 0; u < w; ++u) {
      std::memcpy(&sky_block_[(static_cast<size_t>(v) * w + u) * 3], &row_haze_[v * 3], 3);
    }
  }
  order_.reserve(64);
}

void Renderer::CameraPose(double x, double y, double yaw, Vector3r* position,
                          Quaternionr* orientation) const {
  const double c = std::cos(yaw), s = std::sin(yaw);
  position->x_val = static_cast<float>(x + options_.x_m * c - options_.y_m * s);
  position->y_val = static_cast<float>(y + options_.x_m * s + options_.y_m * c);
  position->z_val = static_cast<float>(options_.z_m);
  // yaw then pitch (nose up positive).
  const double hy = 0.5 * yaw, hp = 0.5 * options_.pitch_deg * M_PI / 180.0;
  orientation->w_val = static_cast<float>(std::cos(hy) * std::cos(hp));
  orientation->x_val = static_cast<float>(std::sin(hy) * std::sin(hp));
  orientation->y_val = static_cast<float>(std::cos(hy) * std::sin(hp));
  orientation->z_val = static_cast<float>(std::sin(hy) * std::cos(hp));
}

void Renderer::Render(double x, double y, double yaw, const std::vector<Obstacle>& obstacles,
                      uint8_t* bgr, float* depth, bool perspective_depth) {
  const View view = ViewFrom(x, y, yaw);
  RenderGround(view, bgr, depth, perspective_depth);
  if (obstacles.empty()) return;
  RenderObstacles(view, obstacles, bgr, depth, perspective_depth);
}

Renderer::View Renderer::ViewFrom(double x, double y, double yaw) const {
  View view;
  view.fx = std::cos(yaw);
  view.fy = std::sin(yaw);
  view.rx = -view.fy;
  view.ry = view.fx;
  view.cam_x = x + options_.x_m * view.fx + options_.y_m * view.rx;
  view.cam_y = y + options_.x_m * view.fy + options_.y_m * view.ry;
  const double pitch = options_.pitch_deg * M_PI / 180.0;
  view.cp = std::cos(pitch);
  view.sp = std::sin(pitch);
  return view;
}

void Renderer::RenderGround(const View& view, uint8_t* bgr, float* depth,
                            bool perspective_depth) const {
  const int w = options_.width, h = options_.height;
  const float far = static_cast<float>(options_.far_m);
  if (bgr != nullptr) std::memcpy(bgr, sky_block_.data(), sky_block_.size());
  if (depth != nullptr) std::fill_n(depth, static_cast<size_t>(sky_rows_) * w, far);
  for (int v = sky_rows_; v < h; ++v) {
    const Row& row = rows_[v];
    if (!row.ground) {
      if (bgr != nullptr) {
        uint8_t* out = bgr + static_cast<size_t>(v) * w * 3;
        const uint8_t* haze = &row_haze_[v * 3];
        for (int u = 0; u < w; ++u, out += 3) {
          out[0] = haze[0];
          out[1] = haze[1];
          out[2] = haze[2];
        }
      }
      if (depth != nullptr) std::fill_n(depth + static_cast<size_t>(v) * w, w, far);
      continue;
    }
    if (bgr != nullptr) TextureRow(view, v, bgr + static_cast<size_t>(v) * w * 3);
    if (depth != nullptr) {
      float* d = depth + static_cast<size_t>(v) * w;
      const float t = static_cast<float>(row.t);
      if (perspective_depth) {
        const float* norm = &ray_norm_[static_cast<size_t>(v) * w];
        for (int u = 0; u < w; ++u) d[u] = t * norm[u];
      } else {
        std::fill_n(d, w, t);
      }
    }
  }
}

void Renderer::TextureRow(const View& view, int v, uint8_t* out) const {
  const int w = options_.width;
  const Row& row = rows_[v];
  const World& world = *world_;
  const double inv_texel = 1.0 / world.options().texel_m;
  const uint8_t* texture = world.texture_data();
  const int64_t tiles_x = world.texture_tiles_x();
  const uint32_t tex_w = static_cast<uint32_t>(world.texture_width());
  const uint32_t tex_h = static_cast<uint32_t>(world.texture_height());
  constexpr double kFix = 65536.0;
  const double t = row.t;
  const double a0 = (0.5 - cx_) / focal_;
  const double px = view.cam_x + t * row.fwd * view.fx + t * a0 * view.rx;
  const double py = view.cam_y + t * row.fwd * view.fy + t * a0 * view.ry;
  const double step = t / focal_;
  int64_t tx = static_cast<int64_t>((px - world.texture_x0()) * inv_texel * kFix);
  int64_t ty = static_cast<int64_t>((py - world.texture_y0()) * inv_texel * kFix);
  const int64_t dtx = static_cast<int64_t>(step * view.rx * inv_texel * kFix);
  const int64_t dty = static_cast<int64_t>(step * view.ry * inv_texel * kFix);
  const uint8_t* palette = &row_palette_[static_cast<size_t>(v) * kNumTextureIds * 3];
  const uint8_t* outside = palette + (static_cast<int>(Material::kGrass) * kMaterialVariants) * 3;
  auto fetch = [&](int64_t x, int64_t y) -> const uint8_t* {
    const int64_t ix = x >> 16, iy = y >> 16;
    if (static_cast<uint64_t>(ix) >= tex_w || static_cast<uint64_t>(iy) >= tex_h) return outside;
    return palette +
           texture[(((iy >> 3) * tiles_x + (ix >> 3)) << 6) + ((iy & 7) << 3) + (ix & 7)] * 3;
  };
  const int n = row.samples;
  if (n == 1) {
    for (int u = 0; u < w; ++u, out += 3, tx += dtx, ty += dty) {
      const uint8_t* color = fetch(tx, ty);
      out[0] = color[0];
      out[1] = color[1];
      out[2] = color[2];
    }
    return;
  }
  // n samples spread evenly across the pixel, centred on it; averaged with rounding.
  const int64_t sx = dtx / n, sy = dty / n;
  const int64_t x0 = -sx * (n - 1) / 2, y0 = -sy * (n - 1) / 2;
  const uint32_t inverse = (65536u + n / 2) / n;
  for (int u = 0; u < w; ++u, out += 3, tx += dtx, ty += dty) {
    uint32_t b = 0, g = 0, r = 0;
    int64_t x = tx + x0, y = ty + y0;
    for (int k = 0; k < n; ++k, x += sx, y += sy) {
      const uint8_t* color = fetch(x, y);
      b += color[0];
      g += color[1];
      r += color[2];
    }
    out[0] = static_cast<uint8_t>((b * inverse + 32768u) >> 16);
    out[1] = static_cast<uint8_t>((g * inverse + 32768u) >> 16);
    out[2] = static_cast<uint8_t>((r * inverse + 32768u) >> 16);
  }
}

void Renderer::RenderObstacles(const View& view, const std::vector<Obstacle>& obstacles,
                               uint8_t* bgr, float* depth, bool perspective_depth) {
  // Painter's algorithm, far to near: boxes stand on flat ground and never overlap each other.
  order_.clear();
  for (int i = 0; i < static_cast<int>(obstacles.size()); ++i) {
    const double dx = obstacles[i].center.x - view.cam_x, dy = obstacles[i].center.y - view.cam_y;
    const double dist2 = dx * dx + dy * dy;
    const double reach = options_.far_m + obstacles[i].half_length + obstacles[i].half_width;
    if (dist2 < reach * reach &&
        dx * view.fx + dy * view.fy > -2.0 * obstacles[i].half_length - 1.0) {
      order_.push_back({dist2, i});
    }
  }
  std::sort(order_.begin(), order_.end(), [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  });
  for (const auto& [dist2, index] : order_) {
    const Obstacle& o = obstacles[index];
    const double fog = 1.0 - std::exp(-std::sqrt(dist2) / options_.fog_distance_m);
    // A car: the body, then a narrower, shorter cabin with dark windows on top of it.
    const double body_top = 0.6 * o.height;
    const Box boxes[2] = {{o.half_length, o.half_width, 0.0, -body_top, false},
                          {0.55 * o.half_length, 0.85 * o.half_width, -body_top, -o.height, true}};
    for (const Box& box : boxes) DrawBox(view, o, box, fog, bgr, depth, perspective_depth);
  }
}

Renderer::Vec3 Renderer::ToCamera(const View& view, double wx, double wy, double wz) const {
  const double dx = wx - view.cam_x, dy = wy - view.cam_y, down = wz + height_;
  const double fwd = dx * view.fx + dy * view.fy;
  const double right = dx * view.rx + dy * view.ry;
  return Vec3{view.cp * fwd - view.sp * down, right, view.sp * fwd + view.cp * down};
}

void Renderer::DrawBox(const View& view, const Obstacle& o, const Box& box, double fog,
                       uint8_t* bgr, float* depth, bool perspective_depth) {
  const double ox = std::cos(o.yaw), oy = std::sin(o.yaw);
  double corner_x[4], corner_y[4];
  const double sl[4] = {1, 1, -1, -1}, sw[4] = {-1, 1, 1, -1};
  for (int k = 0; k < 4; ++k) {
    corner_x[k] = o.center.x + sl[k] * box.half_length * ox - sw[k] * box.half_width * oy;
    corner_y[k] = o.center.y + sl[k] * box.half_length * oy + sw[k] * box.half_width * ox;
  }
  // Sides: k -> k+1, outward normal in the ground plane; then the top.
  for (int k = 0; k < 5; ++k) {
    Vec3 face[4];
    double nx, ny, nz, mx, my, mz;
    if (k < 4) {
      const int k1 = (k + 1) % 4;
      const double ex = corner_x[k1] - corner_x[k], ey = corner_y[k1] - corner_y[k];
      const double len = std::hypot(ex, ey);
      nx = ey / len;
      ny = -ex / len;
      nz = 0.0;
      // Orient outwards.
      mx = 0.5 * (corner_x[k] + corner_x[k1]);
      my = 0.5 * (corner_y[k] + corner_y[k1]);
      if ((mx - o.center.x) * nx + (my - o.center.y) * ny < 0) {
        nx = -nx;
        ny = -ny;
      }
      mz = 0.5 * (box.z_bottom + box.z_top);
      face[0] = ToCamera(view, corner_x[k], corner_y[k], box.z_bottom);
      face[1] = ToCamera(view, corner_x[k1], corner_y[k1], box.z_bottom);
      face[2] = ToCamera(view, corner_x[k1], corner_y[k1], box.z_top);
      face[3] = ToCamera(view, corner_x[k], corner_y[k], box.z_top);
    } else {
      nx = 0.0;
      ny = 0.0;
      nz = -1.0;
      mx = o.center.x;
      my = o.center.y;
      mz = box.z_top;
      for (int j = 0; j < 4; ++j) face[j] = ToCamera(view, corner_x[j], corner_y[j], box.z_top);
    }
    const double to_cam = (view.cam_x - mx) * nx + (view.cam_y - my) * ny + (-height_ - mz) * nz;
    if (to_cam <= 0.0) continue;
    const double light = 0.55 + 0.45 * std::max(0.0, nx * kSun[0] + ny * kSun[1] + nz * kSun[2]);
    uint8_t color[3];
    for (int c = 0; c < 3; ++c) {
      double base = o.bgr[c];
      if (box.cabin && k < 4) base = 35.0 + 0.15 * base;  // windows
      color[c] = static_cast<uint8_t>(std::clamp(base * light, 0.0, 255.0));
    }
    FillPolygon(face, 4, color, fog, bgr, depth, perspective_depth);
  }
}

void Renderer::FillPolygon(const Vec3* in, int n, const uint8_t* color, double fog, uint8_t* bgr,
                           float* depth, bool perspective_depth) {
  // Clip against the near plane (camera-frame x = forward).
  Vec3 clipped[10];
  int m = 0;
  for (int i = 0; i < n; ++i) {
    const Vec3& p = in[i];
    const Vec3& q = in[(i + 1) % n];
    const bool p_in = p.x >= kNearM, q_in = q.x >= kNearM;
    if (p_in) clipped[m++] = p;
    if (p_in != q_in) {
      const double s = (kNearM - p.x) / (q.x - p.x);
      clipped[m++] = {kNearM, p.y + s * (q.y - p.y), p.z + s * (q.z - p.z)};
    }
  }
  if (m < 3) return;
  double us[10], vs[10];
  double vmin = 1e30, vmax = -1e30;
  for (int i = 0; i < m; ++i) {
    us[i] = cx_ + focal_ * clipped[i].y / clipped[i].x;
    vs[i] = cy_ + focal_ * clipped[i].z / clipped[i].x;
    vmin = std::min(vmin, vs[i]);
    vmax = std::max(vmax, vs[i]);
  }
  const int w = options_.width, h = options_.height;
  const int y0 = std::max(0, static_cast<int>(std::ceil(vmin - 0.5)));
  const int y1 = std::min(h - 1, static_cast<int>(std::floor(vmax - 0.5)));
  uint8_t shaded[3];
  for (int c = 0; c < 3; ++c) shaded[c] = Mix(color[c], kHorizonBgr[c], fog);
  // Plane through the face, camera frame: normal . p = offset.
  const Vec3 e1{in[1].x - in[0].x, in[1].y - in[0].y, in[1].z - in[0].z};
  const Vec3 e2{in[2].x - in[0].x, in[2].y - in[0].y, in[2].z - in[0].z};
  const Vec3 normal{e1.y * e2.z - e1.z * e2.y, e1.z * e2.x - e1.x * e2.z,
                    e1.x * e2.y - e1.y * e2.x};
  const double offset = normal.x * in[0].x + normal.y * in[0].y + normal.z * in[0].z;
  for (int y = y0; y <= y1; ++y) {
    const double yc = y + 0.5;
    double xl = 1e30, xr = -1e30;
    for (int i = 0; i < m; ++i) {
      const int j = (i + 1) % m;
      const double va = vs[i], vb = vs[j];
      if ((yc >= va && yc <= vb) || (yc >= vb && yc <= va)) {
        const double x = va == vb ? us[i] : us[i] + (yc - va) / (vb - va) * (us[j] - us[i]);
        xl = std::min(xl, std::min(x, va == vb ? us[j] : x));
        xr = std::max(xr, std::max(x, va == vb ? us[j] : x));
      }
    }
    if (xl > xr) continue;
    const int x0 = std::max(0, static_cast<int>(std::ceil(xl - 0.5)));
    const int x1 = std::min(w - 1, static_cast<int>(std::ceil(xr - 0.5)) - 1);
    const double b = (yc - cy_) / focal_;
    for (int x = x0; x <= x1; ++x) {
      const size_t pixel = static_cast<size_t>(y) * w + x;
      if (bgr != nullptr) {
        bgr[pixel * 3 + 0] = shaded[0];
        bgr[pixel * 3 + 1] = shaded[1];
        bgr[pixel * 3 + 2] = shaded[2];
      }
      if (depth != nullptr) {
        const double a = (x + 0.5 - cx_) / focal_;
        const double denom = normal.x + normal.y * a + normal.z * b;
        double s = std::abs(denom) > 1e-12 ? offset / denom : options_.far_m;
        if (!(s > 0.0) || s > options_.far_m) s = options_.far_m;
        depth[pixel] = static_cast<float>(perspective_depth ? s * ray_norm_[pixel] : s);
      }
    }
  }
}

}  // namespace convoy::sim
