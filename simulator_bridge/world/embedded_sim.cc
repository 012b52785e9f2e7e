#include "simulator_bridge/world/embedded_sim.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/support/status_macros.h"
#include "simulator_bridge/world/png.h"

namespace convoy::sim {
namespace {

constexpr int32_t kCurbObjectId = 0;

bool IsSceneCamera(const std::string& name) {
  for (const char* alias : EmbeddedSim::kCameraNames) {
    if (name == alias) return true;
  }
  return false;
}

void SetFailure(ImageResponse* r, std::string message) {
  r->image_data_uint8.clear();
  r->image_data_float.clear();
  r->width = 0;
  r->height = 0;
  r->message = std::move(message);
}

// How far from a teleported car traffic is moved away.
constexpr double kTrafficClearanceM = 30.0;
// A car put down keeps this far from a stalled car: about 6 s at the cookbook's speed.
constexpr double kStalledClearanceM = 50.0;

}  // namespace

absl::StatusOr<std::unique_ptr<EmbeddedSim>> EmbeddedSim::Create(
    const EmbeddedSimOptions& options) {
  if (options.world == nullptr) return absl::InvalidArgumentError("EmbeddedSim needs a world");
  if (!(options.step_seconds >= 1e-4 && options.step_seconds <= 1.0)) {
    return absl::InvalidArgumentError("step_seconds must be in [1e-4, 1]");
  }
  if (options.num_parked_cars < 0 || options.num_parked_cars > 10000) {
    return absl::InvalidArgumentError("num_parked_cars must be in [0, 10000]");
  }
  if (options.num_stalled_cars < 0 || options.num_stalled_cars > 1000) {
    return absl::InvalidArgumentError("num_stalled_cars must be in [0, 1000]");
  }
  if (options.traffic.cars < 0 || options.traffic.cars > 1000) {
    return absl::InvalidArgumentError("traffic.cars must be in [0, 1000]");
  }
  const CarParams& p = options.car;
  if (!(p.wheelbase_m > 0.5) || !(p.length_m > p.wheelbase_m * 0.5) || !(p.width_m > 0.5) ||
      !(p.max_speed_mps > 0) || !(p.max_reverse_speed_mps > 0) || !(p.max_steer_rad > 0) ||
      !(p.max_steer_rad < 1.5)) {
    return absl::InvalidArgumentError("CarParams out of range");
  }
  CONVOY_ASSIGN_OR_RETURN(std::unique_ptr<Renderer> renderer,
                          Renderer::Create(options.world, options.camera));
  std::unique_ptr<EmbeddedSim> sim(new EmbeddedSim(options));
  sim->renderer_ = std::move(renderer);
  return sim;
}

EmbeddedSim::EmbeddedSim(const EmbeddedSimOptions& options) : options_(options) {
  step_ns_ = static_cast<uint64_t>(std::llround(options_.step_seconds * 1e9));
  obstacles_ = options_.world->PlaceParkedCars(options_.num_parked_cars, options_.seed);
  num_parked_ = static_cast<int>(obstacles_.size());
  num_static_ = num_parked_;
  traffic_ = std::make_unique<Traffic>(*options_.world, obstacles_, options_.traffic);
  obstacles_.reserve(obstacles_.size() + static_cast<size_t>(options_.num_stalled_cars) +
                     static_cast<size_t>(options_.traffic.cars));
  PlaceStalledCars(options_.seed);
  ResetTraffic(options_.seed);
  if (options_.start_pose.has_value()) {
    start_.x = options_.start_pose->position.x_val;
    start_.y = options_.start_pose->position.y_val;
    start_.yaw = YawFromQuaternion(options_.start_pose->orientation);
  } else {
    // AirSim's player start is the map origin: the nearest road point, heading along that road.
    double best = std::numeric_limits<double>::infinity();
    for (const Segment& s : options_.world->map().roads()) {
      const double d = DistanceToSegment({0.0, 0.0}, s);
      if (d < best) {
        best = d;
        const double dx = s.b.x - s.a.x, dy = s.b.y - s.a.y;
        const double len2 = dx * dx + dy * dy;
        const double t = std::clamp(-(s.a.x * dx + s.a.y * dy) / len2, 0.0, 1.0);
        start_.x = s.a.x + t * dx;
        start_.y = s.a.y + t * dy;
        start_.yaw = std::atan2(dy, dx);
      }
    }
  }
  car_ = start_;
  const size_t pixels = static_cast<size_t>(options_.camera.width) * options_.camera.height;
  depth_scratch_.resize(pixels);
}

void EmbeddedSim::ResetCar() {
  car_ = start_;
  controls_ = CarControls{};
  collision_ = CollisionInfo{};
}

void EmbeddedSim::ResetTraffic(uint64_t seed) {
  traffic_->Reset(seed);
  obstacles_.resize(static_cast<size_t>(num_static_ + traffic_->size()));
  traffic_->WriteBoxes(obstacles_.data() + num_static_);
}

void EmbeddedSim::PlaceStalledCars(uint64_t seed) {
  obstacles_.resize(static_cast<size_t>(num_parked_));
  num_static_ = num_parked_;
  if (options_.num_stalled_cars == 0) return;
  stalled_rng_.seed(seed ^ 0x5a17edca75ULL);
  Obstacle o;
  for (int attempt = 0; attempt < 50 * options_.num_stalled_cars &&
                        num_static_ - num_parked_ < options_.num_stalled_cars;
       ++attempt) {
    if (!options_.world->PlaceStalledCar(stalled_rng_, obstacles_, {0.0, 0.0}, 0.0, &o)) continue;
    const int k = num_static_ - num_parked_ + 1;
    o.id = kStalledCarIdBase + k;
    o.name = absl::StrCat(kStalledCarNamePrefix, k);
    obstacles_.push_back(o);
    ++num_static_;
  }
  traffic_->SetBlockers(obstacles_.data() + num_parked_, num_static_ - num_parked_);
}

bool EmbeddedSim::MoveStalledCarsFrom(const Vec2& place) {
  bool moved = false;
  for (int i = num_parked_; i < num_static_; ++i) {
    Obstacle& o = obstacles_[i];
    if (std::hypot(o.center.x - place.x, o.center.y - place.y) >= kStalledClearanceM) continue;
    // Draw against the others (this one set far off meanwhile), clear of the car.
    o.center = {1e12, 1e12};
    bool placed = false;
    for (int attempt = 0; attempt < 200 && !placed; ++attempt) {
      placed = options_.world->PlaceStalledCar(stalled_rng_, obstacles_, place,
                                               kStalledClearanceM + 10.0, &o);
    }
    if (!placed) {  // the roads are full: this episode has one fewer
      obstacles_.erase(obstacles_.begin() + i--);
      --num_static_;
    }
    moved = true;
  }
  if (moved) traffic_->SetBlockers(obstacles_.data() + num_parked_, num_static_ - num_parked_);
  return moved;
}

absl::Status EmbeddedSim::Reset() {
  ResetCar();
  const uint64_t scene = options_.seed + 0x9e3779b97f4a7c15ULL * ++resets_;
  PlaceStalledCars(scene);  // drops the traffic's boxes too; laid out again below
  ResetTraffic(scene);
  return absl::OkStatus();
}

absl::Status EmbeddedSim::ResetScene(uint64_t seed) {
  ResetCar();
  const uint64_t scene = options_.seed ^ (seed * 0xbf58476d1ce4e5b9ULL + 0x94d049bb133111ebULL);
  PlaceStalledCars(scene);  // drops the traffic's boxes too; laid out again below
  ResetTraffic(scene);
  return absl::OkStatus();
}

absl::StatusOr<Pose> EmbeddedSim::GetPose() {
  Pose pose;
  pose.position = {static_cast<float>(car_.x), static_cast<float>(car_.y), 0.0f};
  pose.orientation = QuaternionFromYaw(car_.yaw);
  return pose;
}

absl::Status EmbeddedSim::SetPose(const Pose& pose, bool ignore_collision) {
  // As in AirSim, a NaN position component or a NaN orientation keeps the current value.
  const Vector3r& p = pose.position;
  const Quaternionr& q = pose.orientation;
  if (std::isinf(p.x_val) || std::isinf(p.y_val) || std::isinf(p.z_val)) {
    return absl::InvalidArgumentError("SetPose: infinite position");
  }
  const bool keep_yaw =
      std::isnan(q.w_val) || std::isnan(q.x_val) || std::isnan(q.y_val) || std::isnan(q.z_val);
  if (!keep_yaw &&
      (std::isinf(q.w_val) || std::isinf(q.x_val) || std::isinf(q.y_val) || std::isinf(q.z_val))) {
    return absl::InvalidArgumentError("SetPose: infinite orientation");
  }
  const double x = std::isnan(p.x_val) ? car_.x : p.x_val;
  const double y = std::isnan(p.y_val) ? car_.y : p.y_val;
  const double yaw = keep_yaw ? car_.yaw : YawFromQuaternion(q);
  car_ = CarKinematics{};
  car_.x = x;
  car_.y = y;
  car_.yaw = yaw;
  if (ignore_collision && num_static_ > num_parked_) {
    // Nor in front of a stalled car: those near it go elsewhere, traffic after them.
    if (MoveStalledCarsFrom({x, y}) && traffic_->size() > 0) {
      // A car now beside a moved stalled car would meet the ego car there: lay out anew.
      ResetTraffic(stalled_rng_());
    }
  }
  if (ignore_collision && traffic_->size() > 0) {
    // A teleported car is put down clear of traffic: cars near it go elsewhere.
    traffic_->MakeRoom({x, y}, kTrafficClearanceM);
    traffic_->WriteBoxes(obstacles_.data() + num_static_);
  }
  if (!ignore_collision && Overlaps(car_.x, car_.y, car_.yaw, &scratch_collision_)) {
    collision_ = scratch_collision_;
  }
  return absl::OkStatus();
}

absl::Status EmbeddedSim::SetControls(const CarControls& controls) {
  if (!std::isfinite(controls.throttle) || !std::isfinite(controls.steering) ||
      !std::isfinite(controls.brake)) {
    return absl::InvalidArgumentError("SetControls: non-finite control");
  }
  controls_ = controls;
  return absl::OkStatus();
}

absl::StatusOr<CarControls> EmbeddedSim::GetControls() { return controls_; }

absl::StatusOr<CarState> EmbeddedSim::GetState() {
  const CarParams& p = options_.car;
  CarState s;
  s.speed = static_cast<float>(car_.speed);
  s.gear = controls_.is_manual_gear ? controls_.manual_gear : (car_.speed < -0.01 ? -1 : 1);
  const double rpm = p.idle_rpm + std::abs(car_.speed) / p.max_speed_mps * (p.max_rpm - p.idle_rpm);
  s.rpm = static_cast<float>(std::min(rpm, p.max_rpm));
  s.maxrpm = static_cast<float>(p.max_rpm);
  s.handbrake = controls_.handbrake;
  KinematicsState& k = s.kinematics_estimated;
  const double c = std::cos(car_.yaw), sn = std::sin(car_.yaw);
  k.position = {static_cast<float>(car_.x), static_cast<float>(car_.y), 0.0f};
  k.orientation = QuaternionFromYaw(car_.yaw);
  k.linear_velocity = {static_cast<float>(car_.speed * c), static_cast<float>(car_.speed * sn),
                       0.0f};
  k.angular_velocity = {0.0f, 0.0f, static_cast<float>(car_.yaw_rate)};
  const double lateral = car_.speed * car_.yaw_rate;
  k.linear_acceleration = {static_cast<float>(car_.accel * c - lateral * sn),
                           static_cast<float>(car_.accel * sn + lateral * c), 0.0f};
  s.timestamp = time_ns_;
  return s;
}

absl::StatusOr<CollisionInfo> EmbeddedSim::GetCollisionInfo() {
  CollisionInfo info = collision_;
  collision_ = CollisionInfo{};
  return info;
}

absl::Status EmbeddedSim::Pause(bool paused) {
  paused_ = paused;
  return absl::OkStatus();
}

absl::StatusOr<bool> EmbeddedSim::IsPaused() { return paused_; }

absl::Status EmbeddedSim::ContinueForTime(absl::Duration duration) {
  const double seconds = absl::ToDoubleSeconds(duration);
  if (!std::isfinite(seconds)) return absl::InvalidArgumentError("ContinueForTime: not finite");
  if (seconds <= 0.0) return absl::OkStatus();
  const double steps = std::round(seconds / options_.step_seconds);
  if (steps > 1e7) return absl::InvalidArgumentError("ContinueForTime: more than 1e7 steps");
  Step(std::max<int64_t>(1, static_cast<int64_t>(steps)));
  return absl::OkStatus();
}

void EmbeddedSim::Step(int64_t steps) {
  const CarParams& p = options_.car;
  for (int64_t i = 0; i < steps; ++i) {
    if (traffic_->size() > 0) {
      traffic_->Step(options_.step_seconds,
                     {car_.x, car_.y, car_.yaw, car_.speed, 0.5 * p.length_m, 0.5 * p.width_m});
      traffic_->WriteBoxes(obstacles_.data() + num_static_);
    }
    const CarKinematics before = car_;
    StepCar(options_.car, controls_, options_.step_seconds, &car_);
    time_ns_ += step_ns_;
    ++steps_;
    if (Overlaps(car_.x, car_.y, car_.yaw, &scratch_collision_)) {
      // As in AirSim, a collision stops the car where it touched.
      car_.x = before.x;
      car_.y = before.y;
      car_.yaw = before.yaw;
      car_.accel = -before.speed / options_.step_seconds;
      car_.speed = 0.0;
      car_.yaw_rate = 0.0;
      collision_ = scratch_collision_;
      collision_.time_stamp = time_ns_;
    }
  }
}

bool EmbeddedSim::Overlaps(double x, double y, double yaw, CollisionInfo* info) const {
  const CarParams& p = options_.car;
  const double hl = 0.5 * p.length_m, hw = 0.5 * p.width_m;
  const double c = std::cos(yaw), s = std::sin(yaw);
  const World& world = *options_.world;
  // Footprint outline: corners and side midpoints, enough for the convex curbs and inner corners.
  static constexpr double kProbe[8][2] = {{1, -1}, {1, 0},  {1, 1},   {0, 1},
                                          {-1, 1}, {-1, 0}, {-1, -1}, {0, -1}};
  double worst = -1.0;
  for (const auto& probe : kProbe) {
    const Vec2 point{x + probe[0] * hl * c - probe[1] * hw * s,
                     y + probe[0] * hl * s + probe[1] * hw * c};
    if (world.IsDrivable(point)) continue;
    Vec2 surface, normal;
    const double depth = world.NearestDrivable(point, &surface, &normal);
    if (depth > worst) {
      worst = depth;
      info->has_collided = true;
      info->penetration_depth = static_cast<float>(depth);
      info->normal = {static_cast<float>(normal.x), static_cast<float>(normal.y), 0.0f};
      info->impact_point = {static_cast<float>(surface.x), static_cast<float>(surface.y), 0.0f};
      info->object_name = kCurbObjectName;
      info->object_id = kCurbObjectId;
    }
  }
  for (const Obstacle& o : obstacles_) {
    const double reach = hl + hw + o.half_length + o.half_width;
    const double dx = x - o.center.x, dy = y - o.center.y;
    if (dx * dx + dy * dy > reach * reach) continue;
    Vec2 normal;
    double depth;
    if (RectanglesOverlap({x, y}, yaw, hl, hw, o.center, o.yaw, o.half_length, o.half_width,
                          &normal, &depth) &&
        depth > worst) {
      worst = depth;
      // The car's outline point furthest towards the obstacle along the contact normal.
      const double extent =
          hl * std::abs(normal.x * c + normal.y * s) + hw * std::abs(-normal.x * s + normal.y * c);
      info->has_collided = true;
      info->penetration_depth = static_cast<float>(depth);
      info->normal = {static_cast<float>(normal.x), static_cast<float>(normal.y), 0.0f};
      info->impact_point = {static_cast<float>(x - normal.x * extent),
                            static_cast<float>(y - normal.y * extent), 0.0f};
      info->object_name = o.name;
      info->object_id = o.id;
    }
  }
  if (worst < 0.0) return false;
  info->position = {static_cast<float>(x), static_cast<float>(y), 0.0f};
  info->time_stamp = time_ns_;
  return true;
}

void EmbeddedSim::RenderScene(uint8_t* bgr) {
  renderer_->Render(car_.x, car_.y, car_.yaw, obstacles_, bgr, nullptr, false);
}

void EmbeddedSim::RenderDepth(float* depth, bool perspective) {
  renderer_->Render(car_.x, car_.y, car_.yaw, obstacles_, nullptr, depth, perspective);
}

absl::Status EmbeddedSim::GetImages(const std::vector<ImageRequest>& requests,
                                    std::vector<ImageResponse>* responses) {
  responses->resize(requests.size());
  const int w = options_.camera.width, h = options_.camera.height;
  const size_t pixels = static_cast<size_t>(w) * h;
  for (size_t i = 0; i < requests.size(); ++i) {
    const ImageRequest& request = requests[i];
    ImageResponse& r = (*responses)[i];
    r.camera_name = request.camera_name;
    r.image_type = request.image_type;
    r.pixels_as_float = request.pixels_as_float;
    r.compress = request.compress;
    r.time_stamp = time_ns_;
    r.message.clear();
    renderer_->CameraPose(car_.x, car_.y, car_.yaw, &r.camera_position, &r.camera_orientation);
    if (!IsSceneCamera(request.camera_name)) {
      SetFailure(&r, absl::StrCat("camera '", request.camera_name, "' not found"));
      continue;
    }
    const ImageType type = request.image_type;
    const bool is_depth = type == ImageType::kDepthPlanar || type == ImageType::kDepthPerspective ||
                          type == ImageType::kDepthVis;
    if (type != ImageType::kScene && !is_depth) {
      SetFailure(&r, absl::StrCat("image type ", static_cast<int>(type),
                                  " is not rendered by the embedded simulator"));
      continue;
    }
    r.width = w;
    r.height = h;
    if (type == ImageType::kScene) {
      if (request.pixels_as_float) {
        SetFailure(&r, "scene images have no float pixels");
        continue;
      }
      r.image_data_float.clear();
      r.image_data_uint8.resize(pixels * 3);
      RenderScene(r.image_data_uint8.data());
      if (request.compress) CompressToPng(&r);
      continue;
    }
    const bool perspective = type == ImageType::kDepthPerspective;
    if (request.pixels_as_float) {
      r.image_data_uint8.clear();
      r.image_data_float.resize(pixels);
      RenderDepth(r.image_data_float.data(), perspective);
      continue;
    }
    // Depth as a picture: near is dark, 100 m and beyond white.
    RenderDepth(depth_scratch_.data(), perspective);
    r.image_data_float.clear();
    r.image_data_uint8.resize(pixels * 3);
    for (size_t p = 0; p < pixels; ++p) {
      const uint8_t v =
          static_cast<uint8_t>(std::min(255.0f, depth_scratch_[p] * (255.0f / 100.0f)));
      r.image_data_uint8[p * 3] = r.image_data_uint8[p * 3 + 1] = r.image_data_uint8[p * 3 + 2] = v;
    }
    if (request.compress) CompressToPng(&r);
  }
  return absl::OkStatus();
}

void EmbeddedSim::CompressToPng(ImageResponse* r) {
  if (absl::Status s = EncodePng(r->image_data_uint8.data(), r->width, r->height, PixelOrder::kBgr,
                                 &png_scratch_);
      !s.ok()) {
    SetFailure(r, std::string(s.message()));
    return;
  }
  r->image_data_uint8.swap(png_scratch_);
}

}  // namespace convoy::sim
