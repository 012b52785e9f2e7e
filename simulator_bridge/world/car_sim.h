// The part of AirSim's car API an agent needs, as one abstract interface (CarSim) with the AirSim
// structs it speaks. EmbeddedSim implements it in-process; AirSimClient implements it over the
// AirSim msgpack-rpc protocol (see docs/simulator.md and AIRSIM_PROTOCOL.md).
//
// Coordinates are AirSim's NED: x north/forward, y east/right, z down, metres; orientation is a
// quaternion (w, x, y, z); yaw is rotation about z (positive turns from north towards east).
#ifndef CONVOY_SIMULATOR_BRIDGE_WORLD_CAR_SIM_H_
#define CONVOY_SIMULATOR_BRIDGE_WORLD_CAR_SIM_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace convoy::sim {

struct Vector3r {
  float x_val = 0.0f;
  float y_val = 0.0f;
  float z_val = 0.0f;
};

struct Quaternionr {
  float w_val = 1.0f;
  float x_val = 0.0f;
  float y_val = 0.0f;
  float z_val = 0.0f;
};

// Quaternion for a pure rotation of `yaw` radians about z, and the yaw of any quaternion.
Quaternionr QuaternionFromYaw(double yaw);
double YawFromQuaternion(const Quaternionr& q);

struct Pose {
  Vector3r position;
  Quaternionr orientation;
};

struct KinematicsState {
  Vector3r position;
  Quaternionr orientation;
  Vector3r linear_velocity;
  Vector3r angular_velocity;
  Vector3r linear_acceleration;
  Vector3r angular_acceleration;
};

struct CollisionInfo {
  bool has_collided = false;
  float penetration_depth = 0.0f;
  uint64_t time_stamp = 0;
  Vector3r normal;
  Vector3r impact_point;
  Vector3r position;
  std::string object_name;
  int32_t object_id = -1;
};

struct CarControls {
  float throttle = 0.0f;  // [0, 1]
  float steering = 0.0f;  // [-1, 1], positive turns right
  float brake = 0.0f;     // [0, 1]
  bool handbrake = false;
  bool is_manual_gear = false;
  int32_t manual_gear = 0;  // with is_manual_gear: negative drives backwards
  bool gear_immediate = true;
};

struct CarState {
  float speed = 0.0f;  // m/s along the car's heading; negative when reversing
  int32_t gear = 0;
  float rpm = 0.0f;
  float maxrpm = 0.0f;
  bool handbrake = false;
  KinematicsState kinematics_estimated;
  uint64_t timestamp = 0;  // simulation time, nanoseconds
};

enum class ImageType : int32_t {
  kScene = 0,
  kDepthPlanar = 1,
  kDepthPerspective = 2,
  kDepthVis = 3,
  kDisparityNormalized = 4,
  kSegmentation = 5,
  kSurfaceNormals = 6,
  kInfrared = 7,
  kOpticalFlow = 8,
  kOpticalFlowVis = 9,
};

struct ImageRequest {
  std::string camera_name = "0";
  ImageType image_type = ImageType::kScene;
  bool pixels_as_float = false;
  bool compress = false;
};

// One image. For an uncompressed scene, image_data_uint8 holds width*height*3 bytes, rows top to
// bottom, pixels B, G, R (AirSim before 1.3 sent 4 channels; readers accept both). With
// pixels_as_float, image_data_float holds width*height floats (depth in metres). With compress, a
// PNG. On failure width == height == 0, the data is empty and `message` says why.
struct ImageResponse {
  std::vector<uint8_t> image_data_uint8;
  std::vector<float> image_data_float;
  Vector3r camera_position;
  std::string camera_name;
  Quaternionr camera_orientation;
  uint64_t time_stamp = 0;
  std::string message;
  bool pixels_as_float = false;
  bool compress = false;
  int32_t width = 0;
  int32_t height = 0;
  ImageType image_type = ImageType::kScene;
};

// A car in a simulator. Implementations are not required to be thread-safe: use one CarSim per
// thread. Every call may fail (a remote simulator may be gone) and says so with a Status.
// What a car reports at the end of a control period.
struct SimObservation {
  CarState state;
  CollisionInfo collision;            // the collision since the previous read, if any
  std::vector<ImageResponse> images;  // one per request; reusing it reuses its buffers
};

class CarSim {
 public:
  virtual ~CarSim() = default;

  // Puts the car back at its start pose, stopped, controls zeroed, collision info cleared.
  virtual absl::Status Reset() = 0;
  // Reset() for an episode: a simulator whose scene varies (EmbeddedSim's traffic) lays it out as
  // a function of `seed`; others just Reset().
  virtual absl::Status ResetScene(uint64_t seed) {
    (void)seed;
    return Reset();
  }

  virtual absl::StatusOr<Pose> GetPose() = 0;
  // Teleports the car (it keeps no speed). As in AirSim, NaN position components or a NaN
  // orientation keep their current values. With ignore_collision false, a pose that overlaps a
  // curb or obstacle is reported as a collision.
  virtual absl::Status SetPose(const Pose& pose, bool ignore_collision) = 0;

  virtual absl::Status SetControls(const CarControls& controls) = 0;
  virtual absl::StatusOr<CarControls> GetControls() = 0;
  virtual absl::StatusOr<CarState> GetState() = 0;

  // The last collision since the previous call, then cleared (has_collided false when none).
  virtual absl::StatusOr<CollisionInfo> GetCollisionInfo() = 0;

  // Renders one response per request into `responses` (resized to requests.size()). Reusing the
  // same `responses` across calls reuses its buffers, so a steady loop does not allocate.
  virtual absl::Status GetImages(const std::vector<ImageRequest>& requests,
                                 std::vector<ImageResponse>* responses) = 0;

  // Pause(true) stops a real-time clock; ContinueForTime advances a paused simulation by `duration`
  // (rounded to whole physics steps) and returns once it has, leaving it paused.
  virtual absl::Status Pause(bool paused) = 0;
  virtual absl::StatusOr<bool> IsPaused() = 0;
  virtual absl::Status ContinueForTime(absl::Duration duration) = 0;

  // GetState, GetCollisionInfo and, unless `requests` is empty, GetImages, into `out` (its images
  // are cleared when there are no requests). The default makes the calls in turn; a remote
  // simulator may send them together.
  virtual absl::Status Observe(const std::vector<ImageRequest>& requests, SimObservation* out);

  // One control period: SetControls(controls), ContinueForTime(duration), then Observe. The
  // default makes the calls in turn; a remote simulator may send them together.
  virtual absl::Status Advance(const CarControls& controls, absl::Duration duration,
                               const std::vector<ImageRequest>& requests, SimObservation* out);
};

}  // namespace convoy::sim

#endif  // CONVOY_SIMULATOR_BRIDGE_WORLD_CAR_SIM_H_
