// EmbeddedSim: a deterministic in-process car simulator behind the CarSim interface. A kinematic
// car (car_model.h) drives on a World among traffic (traffic.h), collides with its curbs, parked
// cars and traffic, and looks through
// a software-rendered camera (renderer.h). Time advances only when asked (ContinueForTime, Step):
// a run is bit-for-bit reproducible for a seed and independent of wall-clock time.
//
// Not thread-safe; many EmbeddedSims may run in parallel, one per thread, sharing one World.
// After the first frame, stepping and rendering allocate nothing.
#ifndef CONVOY_SIMULATOR_BRIDGE_WORLD_EMBEDDED_SIM_H_
#define CONVOY_SIMULATOR_BRIDGE_WORLD_EMBEDDED_SIM_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "simulator_bridge/world/car_model.h"
#include "simulator_bridge/world/car_sim.h"
#include "simulator_bridge/world/renderer.h"
#include "simulator_bridge/world/traffic.h"
#include "simulator_bridge/world/world.h"

namespace convoy::sim {

struct EmbeddedSimOptions {
  std::shared_ptr<const World> world;  // required
  CarParams car;
  CameraOptions camera;
  double step_seconds = 0.05;  // fixed physics step
  int num_parked_cars = 0;     // static obstacles, placed from `seed`
  // Cars stalled on the road centre line, in the way (at most 1000): laid out again on every reset,
  // as the traffic is, and moved from where the car is put down (SetPose with
  // ignore_collision) so that it has room to see one and swerve.
  int num_stalled_cars = 0;
  // Moving cars (traffic.cars of them, at most 1000), laid out again on every reset: from the
  // episode's seed on ResetScene(seed), else from `seed` and the count of resets so far.
  TrafficOptions traffic;
  uint64_t seed = 0;
  // Where Reset() puts the car; default: the road point nearest the map origin (AirSim's player
  // start), heading along that road.
  std::optional<Pose> start_pose;
};

class EmbeddedSim : public CarSim {
 public:
  // The names a request may use for the single scene camera (AirSim's front camera and its alias).
  static constexpr const char* kCameraNames[] = {"", "0", "front_center", "fc"};

  static absl::StatusOr<std::unique_ptr<EmbeddedSim>> Create(const EmbeddedSimOptions& options);

  // CarSim.
  absl::Status Reset() override;
  absl::Status ResetScene(uint64_t seed) override;
  absl::StatusOr<Pose> GetPose() override;
  absl::Status SetPose(const Pose& pose, bool ignore_collision) override;
  absl::Status SetControls(const CarControls& controls) override;
  absl::StatusOr<CarControls> GetControls() override;
  absl::StatusOr<CarState> GetState() override;
  absl::StatusOr<CollisionInfo> GetCollisionInfo() override;
  absl::Status GetImages(const std::vector<ImageRequest>& requests,
                         std::vector<ImageResponse>* responses) override;
  absl::Status Pause(bool paused) override;
  absl::StatusOr<bool> IsPaused() override;
  // Advances max(1, round(duration / step_seconds)) steps for a positive duration, none otherwise.
  absl::Status ContinueForTime(absl::Duration duration) override;

  // Advances exactly `steps` physics steps.
  void Step(int64_t steps);
  // Renders the scene camera straight into `bgr` (width*height*3 bytes), skipping ImageResponse.
  void RenderScene(uint8_t* bgr);
  void RenderDepth(float* depth, bool perspective);

  const CarKinematics& kinematics() const { return car_; }
  const CarControls& controls() const { return controls_; }
  // Parked cars first, then the traffic's cars where they are now.
  const std::vector<Obstacle>& obstacles() const { return obstacles_; }
  int num_parked_cars() const { return num_parked_; }
  int num_stalled_cars() const { return num_static_ - num_parked_; }
  const Traffic& traffic() const { return *traffic_; }
  const World& world() const { return *options_.world; }
  const EmbeddedSimOptions& options() const { return options_; }
  const CameraOptions& camera() const { return options_.camera; }
  uint64_t time_ns() const { return time_ns_; }
  int64_t steps() const { return steps_; }

  // True when the car's footprint at (x, y, yaw) touches a curb or an obstacle; fills `info`'s
  // impact point, normal, penetration depth and object when it does.
  bool Overlaps(double x, double y, double yaw, CollisionInfo* info) const;

 private:
  explicit EmbeddedSim(const EmbeddedSimOptions& options);
  // Replaces r's 8-bit BGR pixels by their PNG encoding (in png_scratch_'s storage), or marks r failed.
  void CompressToPng(ImageResponse* r);
  void ResetCar();
  void ResetTraffic(uint64_t seed);
  // Lays out the stalled cars from `seed` (obstacles_[num_parked_, num_static_)).
  void PlaceStalledCars(uint64_t seed);
  // Moves the stalled cars near `place` elsewhere; true when one moved.
  bool MoveStalledCarsFrom(const Vec2& place);

  EmbeddedSimOptions options_;
  std::unique_ptr<Renderer> renderer_;
  std::vector<Obstacle> obstacles_;
  int num_parked_ = 0;
  int num_static_ = 0;  // parked and stalled cars; traffic follows them in obstacles_
  std::mt19937_64 stalled_rng_;
  std::unique_ptr<Traffic> traffic_;
  uint64_t resets_ = 0;
  CarKinematics car_;
  CarKinematics start_;
  CarControls controls_;
  CollisionInfo collision_;  // latest unread collision
  CollisionInfo scratch_collision_;
  uint64_t time_ns_ = 0;
  uint64_t step_ns_ = 0;
  int64_t steps_ = 0;
  bool paused_ = true;
  std::vector<float> depth_scratch_;
  std::vector<uint8_t> png_scratch_;
};

}  // namespace convoy::sim

#endif  // CONVOY_SIMULATOR_BRIDGE_WORLD_EMBEDDED_SIM_H_
