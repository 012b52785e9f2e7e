#include "simulator_bridge/car_sim.h"

#include <cmath>

namespace convoy {

Quaternionr QuaternionFromYaw(double yaw) {
  Quaternionr q;
  q.w_val = static_cast<float>(std::cos(0.5 * yaw));
  q.z_val = static_cast<float>(std::sin(0.5 * yaw));
  return q;
}

double YawFromQuaternion(const Quaternionr& q) {
  const double w = q.w_val, x = q.x_val, y = q.y_val, z = q.z_val;
  return std::atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z));
}

absl::Status CarSim::Observe(const std::vector<ImageRequest>& requests, SimObservation* out) {
  absl::StatusOr<CarState> state = GetState();
  if (!state.ok()) return state.status();
  out->state = *state;
  absl::StatusOr<CollisionInfo> collision = GetCollisionInfo();
  if (!collision.ok()) return collision.status();
  out->collision = *std::move(collision);
  if (requests.empty()) {
    out->images.clear();
    return absl::OkStatus();
  }
  return GetImages(requests, &out->images);
}

absl::Status CarSim::Advance(const CarControls& controls, absl::Duration duration,
                             const std::vector<ImageRequest>& requests, SimObservation* out) {
  if (absl::Status st = SetControls(controls); !st.ok()) return st;
  if (absl::Status st = ContinueForTime(duration); !st.ok()) return st;
  return Observe(requests, out);
}

}  // namespace convoy
