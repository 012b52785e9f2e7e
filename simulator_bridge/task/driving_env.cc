#include "simulator_bridge/task/driving_env.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/support/status_macros.h"

namespace convoy::sim {
namespace {

constexpr int kGraySize = 84;

double Uniform01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

}  // namespace

std::vector<DrivingAction> CookbookActions() {
  std::vector<DrivingAction> actions;
  for (float steering : {-1.0f, -0.5f, 0.0f, 0.5f, 1.0f})
    actions.push_back({steering, -1.0f, 0.0f});
  return actions;
}

bool IsSuccess(TerminationReason reason, const DrivingEnvOptions& options) {
  return reason == TerminationReason::kCompleted ||
         (reason == TerminationReason::kTimeLimit && options.route_length_m <= 0.0);
}

double TaskCompletion(TerminationReason reason, const DrivingCarState& car,
                      const DrivingEnvOptions& options) {
  if (IsSuccess(reason, options)) return 1.0;
  const double done = options.route_length_m > 0.0
                          ? car.distance_driven_m / options.route_length_m
                          : car.episode_time_sec / options.max_epoch_runtime_sec;
  return std::clamp(done, 0.0, 1.0);
}

absl::StatusOr<std::vector<int64_t>> MirrorActions(const std::vector<DrivingAction>& actions) {
  std::vector<int64_t> mirror;
  for (size_t a = 0; a < actions.size(); ++a) {
    const DrivingAction& action = actions[a];
    auto it = std::find_if(actions.begin(), actions.end(), [&](const DrivingAction& other) {
      return other.steering == -action.steering && other.throttle == action.throttle &&
             other.brake == action.brake;
    });
    if (it == actions.end()) {
      return absl::NotFoundError(absl::StrCat(
          "action ", a, " (steering ", action.steering, ") has no mirror image: no action steers ",
          -action.steering, " with the same throttle and brake"));
    }
    mirror.push_back(it - actions.begin());
  }
  return mirror;
}

const char* TerminationReasonName(TerminationReason reason) {
  switch (reason) {
    case TerminationReason::kNone:
      return "none";
    case TerminationReason::kCollision:
      return "collision";
    case TerminationReason::kOffCenterLine:
      return "off_center_line";
    case TerminationReason::kTooSlow:
      return "too_slow";
    case TerminationReason::kCompleted:
      return "completed";
    case TerminationReason::kTimeLimit:
      return "time_limit";
  }
  return "unknown";
}

absl::StatusOr<std::unique_ptr<DrivingEnv>> DrivingEnv::Create(CarSim* sim, RoadMap map,
                                                               const DrivingEnvOptions& options) {
  if (sim == nullptr) return absl::InvalidArgumentError("DrivingEnv needs a CarSim");
  if (options.frame_stack < 1 || options.frame_stack > 64) {
    return absl::InvalidArgumentError("frame_stack must be in [1, 64]");
  }
  if (options.actions.empty()) return absl::InvalidArgumentError("no actions");
  if (!(options.control_period_sec > 0) || options.settle_sec < 0 ||
      !(options.max_epoch_runtime_sec > 0) || !(options.max_distance_m > 0) ||
      !(options.route_length_m >= 0) ||
      !(options.start_fraction_min >= 0 &&
        options.start_fraction_min <= options.start_fraction_max &&
        options.start_fraction_max <= 1)) {
    return absl::InvalidArgumentError("DrivingEnvOptions out of range");
  }
  if (options.observation == ObservationKind::kCookbookCrop &&
      (options.crop_top < 0 || options.crop_left < 0 || options.crop_bottom < options.crop_top ||
       options.crop_right < options.crop_left)) {
    return absl::InvalidArgumentError("bad crop rectangle");
  }
  if (map.roads().empty() || map.center_lines().empty()) {
    return absl::InvalidArgumentError("map has no roads or centre lines");
  }
  return std::unique_ptr<DrivingEnv>(new DrivingEnv(sim, std::move(map), options));
}

absl::StatusOr<std::unique_ptr<DrivingEnv>> DrivingEnv::CreateEmbedded(
    const EmbeddedSimOptions& sim_options, const DrivingEnvOptions& options) {
  CONVOY_ASSIGN_OR_RETURN(std::unique_ptr<EmbeddedSim> sim, EmbeddedSim::Create(sim_options));
  CONVOY_ASSIGN_OR_RETURN(std::unique_ptr<DrivingEnv> env,
                          Create(sim.get(), sim_options.world->map(), options));
  env->owned_sim_ = std::move(sim);
  return env;
}

DrivingEnv::DrivingEnv(CarSim* sim, RoadMap map, const DrivingEnvOptions& options)
    : sim_(sim), map_(std::move(map)), options_(options) {
  if (options_.observation == ObservationKind::kCookbookCrop) {
    shape_ = {3 * options_.frame_stack, options_.crop_bottom - options_.crop_top + 1,
              options_.crop_right - options_.crop_left + 1};
  } else if (options_.observation == ObservationKind::kGray84) {
    shape_ = {options_.frame_stack, kGraySize, kGraySize};
  } else {
    shape_ = {0, 0, 0};
  }
  frames_ = FrameStack(observation_size() / options_.frame_stack, options_.frame_stack);
  if (options_.observation != ObservationKind::kNone) {
    ImageRequest request;
    request.camera_name = options_.camera_name;
    request.image_type = ImageType::kScene;
    requests_.push_back(request);
  }
}

absl::StatusOr<StepResult> DrivingEnv::Reset(uint64_t seed, uint8_t* observation) {
  active_ = false;
  std::mt19937_64 rng(seed);
  const std::vector<Segment>& roads = map_.roads();
  const Segment& s = roads[rng() % roads.size()];
  const double f = options_.start_fraction_min +
                   Uniform01(rng) * (options_.start_fraction_max - options_.start_fraction_min);
  const bool reverse = (rng() & 1u) != 0;
  double yaw = std::atan2(s.b.y - s.a.y, s.b.x - s.a.x);
  if (reverse) yaw = std::remainder(yaw + M_PI, 2.0 * M_PI);
  Pose pose;
  pose.position = {static_cast<float>(s.a.x + f * (s.b.x - s.a.x)),
                   static_cast<float>(s.a.y + f * (s.b.y - s.a.y)), options_.start_z};
  pose.orientation = QuaternionFromYaw(yaw);

  CONVOY_RETURN_IF_ERROR(sim_->Pause(true));
  if (options_.reset_simulator) {
    CONVOY_RETURN_IF_ERROR(sim_->ResetScene(seed));
  }
  CONVOY_RETURN_IF_ERROR(sim_->SetPose(pose, /*ignore_collision=*/true));
  if (options_.settle_sec > 0) {
    if (absl::Status st = sim_->Advance(CarControls{}, absl::Seconds(options_.settle_sec),
                                        requests_, &sim_observation_);
        !st.ok()) {
      return st;
    }
  } else {
    if (absl::Status st = sim_->SetControls(CarControls{}); !st.ok()) return st;
    CONVOY_RETURN_IF_ERROR(sim_->Observe(requests_, &sim_observation_));
  }
  // Whatever the teleport and the settling touched belongs to no episode: that read cleared it.
  sim_observation_.collision = CollisionInfo{};

  const CarState& state = sim_observation_.state;
  start_timestamp_ = state.timestamp;
  last_x_ = state.kinematics_estimated.position.x_val;
  last_y_ = state.kinematics_estimated.position.y_val;
  distance_driven_ = 0.0;
  last_speed_ = state.speed;
  StepResult result;
  CONVOY_RETURN_IF_ERROR(Observe(&result, observation, /*first=*/true));
  active_ = !result.done;
  return result;
}

absl::StatusOr<StepResult> DrivingEnv::Step(int action, uint8_t* observation) {
  if (!active_)
    return absl::FailedPreconditionError("Step before Reset or after the episode ended");
  if (action < 0 || action >= num_actions()) {
    return absl::InvalidArgumentError(
        absl::StrCat("action ", action, " not in [0, ", num_actions(), ")"));
  }
  const DrivingAction& a = options_.actions[action];
  CarControls controls;
  controls.steering = a.steering;
  if (a.throttle < 0.0f) {
    const bool brake = last_speed_ > options_.brake_above_mps;
    controls.throttle = brake ? 0.0f : 1.0f;
    controls.brake = brake ? 1.0f : 0.0f;
  } else {
    controls.throttle = a.throttle;
    controls.brake = a.brake;
  }
  CONVOY_RETURN_IF_ERROR(sim_->Advance(controls, absl::Seconds(options_.control_period_sec),
                                       requests_, &sim_observation_));
  StepResult result;
  CONVOY_RETURN_IF_ERROR(Observe(&result, observation, /*first=*/false));
  active_ = !result.done;
  return result;
}

absl::Status DrivingEnv::Observe(StepResult* result, uint8_t* observation, bool first) {
  const CarState* state = &sim_observation_.state;
  const CollisionInfo* collision = &sim_observation_.collision;
  if (!requests_.empty()) {
    CONVOY_RETURN_IF_ERROR(ObserveImage(observation, first));
  }

  const KinematicsState& k = state->kinematics_estimated;
  DrivingCarState& car = result->car;
  car.x = k.position.x_val;
  car.y = k.position.y_val;
  car.yaw = YawFromQuaternion(k.orientation);
  car.speed = state->speed;
  distance_driven_ += std::hypot(car.x - last_x_, car.y - last_y_);
  last_x_ = car.x;
  last_y_ = car.y;
  last_speed_ = state->speed;
  car.distance_driven_m = distance_driven_;
  car.episode_time_sec =
      state->timestamp >= start_timestamp_ ? (state->timestamp - start_timestamp_) * 1e-9 : 0.0;
  car.distance_to_center_m = map_.DistanceToCenterLine({car.x, car.y});
  car.collided = collision->has_collided;
  if (car.collided) car.collided_with = collision->object_name;
  result->reward = static_cast<float>(std::exp(-options_.reward_decay * car.distance_to_center_m));

  if (car.collided) {
    result->reason = TerminationReason::kCollision;
  } else if (car.distance_to_center_m > options_.max_distance_m) {
    result->reason = TerminationReason::kOffCenterLine;
  } else if (options_.route_length_m > 0.0 && car.distance_driven_m >= options_.route_length_m) {
    result->reason = TerminationReason::kCompleted;
  } else if (car.episode_time_sec >= options_.max_epoch_runtime_sec - 1e-9) {
    result->reason = TerminationReason::kTimeLimit;
  } else if (car.episode_time_sec > options_.min_speed_grace_sec &&
             std::abs(car.speed) < options_.min_speed_mps) {
    result->reason = TerminationReason::kTooSlow;
  }
  result->done = result->reason != TerminationReason::kNone;
  if (result->done && !IsTruncation(result->reason)) {
    result->reward -= static_cast<float>(options_.failure_penalty);
  }
  return absl::OkStatus();
}

absl::Status DrivingEnv::ObserveImage(uint8_t* observation, bool first) {
  const std::vector<ImageResponse>& responses = sim_observation_.images;
  if (responses.size() != 1) return absl::InternalError("simulator returned no image");
  // The frame straight into the stack, then the stack into the caller's buffer.
  CONVOY_RETURN_IF_ERROR(WriteFrame(responses[0], frames_.PushSlot()));
  if (first) frames_.FillWithNewest();
  if (observation != nullptr) std::memcpy(observation, frames_.data(), frames_.size());

  return absl::OkStatus();
}

absl::Status DrivingEnv::WriteFrame(const ImageResponse& image, uint8_t* frame) {
  const int w = image.width, h = image.height;
  if (w <= 0 || h <= 0) {
    return absl::UnavailableError(absl::StrCat("simulator returned no image: ", image.message));
  }
  if (image.compress || image.pixels_as_float) {
    return absl::InternalError("expected an uncompressed uint8 scene image");
  }
  const size_t pixels = static_cast<size_t>(w) * h;
  int channels;
  if (image.image_data_uint8.size() == pixels * 3) {
    channels = 3;
  } else if (image.image_data_uint8.size() == pixels * 4) {
    channels = 4;
  } else {
    return absl::DataLossError(absl::StrCat("scene image of ", w, "x", h, " has ",
                                            image.image_data_uint8.size(), " bytes"));
  }
  const uint8_t* src = image.image_data_uint8.data();
  if (options_.observation == ObservationKind::kCookbookCrop) {
    if (options_.crop_bottom >= h || options_.crop_right >= w) {
      return absl::FailedPreconditionError(
          absl::StrCat("scene image ", w, "x", h, " is smaller than the crop"));
    }
    WriteCrop(src, w, channels, frame);
    return absl::OkStatus();
  }
  WriteGray84(src, w, h, channels, frame);
  return absl::OkStatus();
}

void DrivingEnv::WriteCrop(const uint8_t* src, int w, int channels, uint8_t* frame) const {
  const int ch = shape_[1], cw = shape_[2];
  const size_t plane = static_cast<size_t>(ch) * cw;
  for (int y = 0; y < ch; ++y) {
    const uint8_t* row =
        src + (static_cast<size_t>(options_.crop_top + y) * w + options_.crop_left) * channels;
    uint8_t* out0 = frame + static_cast<size_t>(y) * cw;
    uint8_t* out1 = out0 + plane;
    uint8_t* out2 = out1 + plane;
    if (channels == 3) {  // the common case, kept separate so the compiler can unroll it
      for (int x = 0; x < cw; ++x, row += 3) {
        out0[x] = row[0];
        out1[x] = row[1];
        out2[x] = row[2];
      }
    } else {
      for (int x = 0; x < cw; ++x, row += 4) {
        out0[x] = row[0];
        out1[x] = row[1];
        out2[x] = row[2];
      }
    }
  }
}

void DrivingEnv::WriteGray84(const uint8_t* src, int w, int h, int channels, uint8_t* frame) {
  // Gray 84x84 by area averaging; box bounds depend only on the image size.
  if (box_x_.size() != kGraySize + 1 || box_x_.back() != w || box_y_.back() != h) {
    box_x_.resize(kGraySize + 1);
    box_y_.resize(kGraySize + 1);
    for (int i = 0; i <= kGraySize; ++i) {
      box_x_[i] = static_cast<int>(static_cast<int64_t>(i) * w / kGraySize);
      box_y_[i] = static_cast<int>(static_cast<int64_t>(i) * h / kGraySize);
    }
  }
  // Separable: sum the luma of the box's source rows per column, then the columns per box.
  column_sums_.resize(static_cast<size_t>(w));
  for (int oy = 0; oy < kGraySize; ++oy) {
    const int y0 = box_y_[oy], y1 = std::max(box_y_[oy + 1], y0 + 1);
    std::fill(column_sums_.begin(), column_sums_.end(), 0u);
    for (int y = y0; y < y1; ++y) {
      const uint8_t* p = src + static_cast<size_t>(y) * w * channels;
      uint32_t* sums = column_sums_.data();
      // Pixels are B, G, R (AirSim's byte order); luma weights 29, 150, 77 over 256.
      if (channels == 3) {
        for (int x = 0; x < w; ++x, p += 3) sums[x] += 29u * p[0] + 150u * p[1] + 77u * p[2];
      } else {
        for (int x = 0; x < w; ++x, p += 4) sums[x] += 29u * p[0] + 150u * p[1] + 77u * p[2];
      }
    }
    for (int ox = 0; ox < kGraySize; ++ox) {
      const int x0 = box_x_[ox], x1 = std::max(box_x_[ox + 1], x0 + 1);
      uint32_t sum = 0;
      for (int x = x0; x < x1; ++x) sum += column_sums_[x];
      const uint32_t count = static_cast<uint32_t>((y1 - y0) * (x1 - x0));
      frame[oy * kGraySize + ox] = static_cast<uint8_t>((sum / count + 128u) >> 8);
    }
  }
}

}  // namespace convoy::sim
