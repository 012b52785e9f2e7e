// DrivingEnv: the cookbook's reset/step driving task over any CarSim (EmbeddedSim in-process, or
// AirSimClient to AirSim or convoy_sim), so an agent sees the same task wherever the car lives.
//
//   Reset(seed): a random road_lines segment, a point 0.3-0.7 along it, heading along it in a
//   random
//     direction; teleport, settle, and return the first observation.
//   Step(action): set controls for one control period, advance the simulation by it (lock-step),
//     return the observation, reward exp(-decay * d) with d the distance to the nearest lane
//     centre-line segment (less failure_penalty on a failure), and whether the episode ended
//     (collision, d > max_distance, too slow after the grace period, the route driven, or the
//     time limit, all in simulation time).
//
// The task: with route_length_m = 0 (the cookbook's), stay on the road until the time limit; with
// route_length_m > 0, drive that many metres without an infraction (a collision, leaving the
// centre line, stopping) before the time limit. The camera-only model sees no destination, so the
// task is distance, not a route to a goal.
//
// Observations are uint8, CHW, written into a caller-owned buffer of observation_size() bytes:
//   kCookbookCrop: 3 x 59 x 255, rows 76..134 and columns 0..254 of the 256x144 scene, channels in
//                  the camera's byte order (B, G, R);
//   kGray84:       1 x 84 x 84, the whole scene area-averaged, luma 0.299 R + 0.587 G + 0.114 B
//                  (give the camera 84x84 to render only what is kept);
//   kNone:         no image at all (0 x 0 x 0): the car state alone, for controllers and speed;
// with frame_stack k > 1 the k most recent frames are stacked along C, oldest first (after a reset
// every slot holds the first frame).
//
// Not thread-safe; one DrivingEnv (and its CarSim) per thread. Step allocates nothing once the
// first images have arrived over an EmbeddedSim.
#ifndef CONVOY_SIMULATOR_BRIDGE_TASK_DRIVING_ENV_H_
#define CONVOY_SIMULATOR_BRIDGE_TASK_DRIVING_ENV_H_

#include <array>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "simulator_bridge/task/frame_stack.h"
#include "simulator_bridge/world/car_sim.h"
#include "simulator_bridge/world/embedded_sim.h"
#include "simulator_bridge/world/road_map.h"

namespace convoy::sim {

enum class ObservationKind { kCookbookCrop, kGray84, kNone };

// One discrete action. A negative throttle selects the cookbook's rule: full throttle, or full
// brake above DrivingEnvOptions::brake_above_mps.
struct DrivingAction {
  float steering = 0.0f;
  float throttle = -1.0f;
  float brake = 0.0f;
};

// The cookbook's five steering values with its throttle rule.
std::vector<DrivingAction> CookbookActions();
// Each action's mirror image: the index of the action with the same throttle and brake and the
// steering negated (the cookbook's: 4, 3, 2, 1, 0). NOT_FOUND naming the first action that has
// none.
absl::StatusOr<std::vector<int64_t>> MirrorActions(const std::vector<DrivingAction>& actions);

struct DrivingEnvOptions {
  ObservationKind observation = ObservationKind::kCookbookCrop;
  int frame_stack = 1;
  std::vector<DrivingAction> actions = CookbookActions();
  double brake_above_mps = 9.0;
  double control_period_sec = 0.1;      // simulation time per Step
  double settle_sec = 0.2;              // after the teleport, before the first observation
  double max_epoch_runtime_sec = 30.0;  // the cookbook's --max_epoch_runtime_sec, simulation time
  double route_length_m = 0.0;          // > 0: the episode is completed after this distance
  double max_distance_m = 3.5;          // from the nearest centre line
  double min_speed_mps = 2.0;
  double min_speed_grace_sec = 3.0;  // the slow-speed rule applies after this
  double reward_decay = 1.2;         // reward = exp(-reward_decay * d)
  // Subtracted from the last step's reward when the car ends the episode itself (a collision,
  // leaving the centre line, stopping); not when it is cut short (IsTruncation). 0: the
  // cookbook's reward, where a failure costs only the return it forgoes.
  double failure_penalty = 0.0;
  double start_fraction_min = 0.3;  // along the start segment
  double start_fraction_max = 0.7;
  float start_z = 0.0f;  // NED z of the start pose (AirSim maps may want < 0)
  // Reset() calls the simulator's reset before teleporting, as the cookbook did. AirSim's reset
  // (and convoy_sim's) resets every vehicle on the server: turn this off when cars share a server.
  // Sharing also shares the clock, so lock-step agents should each have their own server.
  bool reset_simulator = true;
  std::string camera_name = "0";
  // The cookbook crop, inclusive pixel bounds in the scene image.
  int crop_top = 76;
  int crop_bottom = 134;
  int crop_left = 0;
  int crop_right = 254;
};

enum class TerminationReason {
  kNone = 0,
  kCollision,
  kOffCenterLine,
  kTooSlow,
  kTimeLimit,
  kCompleted,  // route_length_m driven
};
const char* TerminationReasonName(TerminationReason reason);
// Whether an episode that ended this way was cut short rather than ended by the car (the time
// limit, or the route driven): learning bootstraps past it.
inline bool IsTruncation(TerminationReason reason) {
  return reason == TerminationReason::kTimeLimit || reason == TerminationReason::kCompleted;
}

// The car as the environment saw it after a Reset or Step, for logging.
struct DrivingCarState {
  double x = 0.0;
  double y = 0.0;
  double yaw = 0.0;
  double speed = 0.0;
  double distance_to_center_m = 0.0;
  double distance_driven_m = 0.0;  // path length since Reset
  double episode_time_sec = 0.0;   // simulation time since Reset
  bool collided = false;
  std::string collided_with;
};

// Whether an episode that ended this way did what `options` asked: drove its route, or, with
// no route, stayed on the road to the time limit.
bool IsSuccess(TerminationReason reason, const DrivingEnvOptions& options);
// How much of the task an episode did: distance over route_length_m, or (no route) episode time
// over the time limit; 1 when it succeeded.
double TaskCompletion(TerminationReason reason, const DrivingCarState& car,
                      const DrivingEnvOptions& options);

struct StepResult {
  float reward = 0.0f;
  bool done = false;
  TerminationReason reason = TerminationReason::kNone;
  DrivingCarState car;
};

class DrivingEnv {
 public:
  // Drives `sim` (borrowed; it must outlive the DrivingEnv) on `map`'s roads and centre lines.
  static absl::StatusOr<std::unique_ptr<DrivingEnv>> Create(CarSim* sim, RoadMap map,
                                                            const DrivingEnvOptions& options);
  // Owns an EmbeddedSim on `sim_options.world` (the map comes from the world).
  static absl::StatusOr<std::unique_ptr<DrivingEnv>> CreateEmbedded(
      const EmbeddedSimOptions& sim_options, const DrivingEnvOptions& options);

  // Starts an episode; the start pose is a function of `seed` only.
  absl::StatusOr<StepResult> Reset(uint64_t seed, uint8_t* observation);
  // One control period under options.actions[action]. FAILED_PRECONDITION before Reset or after
  // the episode ended; INVALID_ARGUMENT for an action out of range.
  absl::StatusOr<StepResult> Step(int action, uint8_t* observation);

  // {channels (frame_stack * 3 or * 1), height, width}.
  std::array<int, 3> observation_shape() const { return shape_; }
  size_t observation_size() const { return static_cast<size_t>(shape_[0]) * shape_[1] * shape_[2]; }
  int num_actions() const { return static_cast<int>(options_.actions.size()); }
  const DrivingEnvOptions& options() const { return options_; }
  const RoadMap& map() const { return map_; }
  CarSim& sim() { return *sim_; }

 private:
  DrivingEnv(CarSim* sim, RoadMap map, const DrivingEnvOptions& options);
  // The episode's view of sim_observation_, just read by Reset or Step.
  absl::Status Observe(StepResult* result, uint8_t* observation, bool first);
  absl::Status ObserveImage(uint8_t* observation, bool first);
  absl::Status WriteFrame(const ImageResponse& image, uint8_t* frame);
  // The cookbook's crop of a scene `w` pixels wide, planar, into `frame`.
  void WriteCrop(const uint8_t* src, int w, int channels, uint8_t* frame) const;
  // The scene (w x h) as 84x84 gray by area averaging, into `frame`.
  void WriteGray84(const uint8_t* src, int w, int h, int channels, uint8_t* frame);

  std::unique_ptr<CarSim> owned_sim_;
  CarSim* sim_;
  RoadMap map_;
  DrivingEnvOptions options_;
  std::array<int, 3> shape_{};
  std::vector<ImageRequest> requests_;
  SimObservation sim_observation_;  // what the simulator reported last
  FrameStack frames_{0, 1};         // the episode's newest frame_stack frames
  std::vector<int> box_x_;          // gray84 area boundaries, 85 each
  std::vector<int> box_y_;
  std::vector<uint32_t> column_sums_;  // gray84 scratch, one per scene column
  bool active_ = false;
  uint64_t start_timestamp_ = 0;
  double last_x_ = 0.0;
  double last_y_ = 0.0;
  double distance_driven_ = 0.0;
  float last_speed_ = 0.0f;
};

}  // namespace convoy::sim

#endif  // CONVOY_SIMULATOR_BRIDGE_TASK_DRIVING_ENV_H_
