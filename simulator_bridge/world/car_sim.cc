#include "simulator_bridge/world/car_sim.h"

#include <cmath>

#include "common/support/status_macros.h"

namespace convoy::sim {

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
  CONVOY_ASSIGN_OR_RETURN(CarState state, GetState());
  out->state = state;
  CONVOY_ASSIGN_OR_RETURN(CollisionInfo collision, GetCollisionInfo());
  out->collision = std::move(collision);
  if (requests.empty()) {
    out->images.clear();
    return absl::OkStatus();
  }
  return GetImages(requests, &out->images);
}

absl::Status CarSim::Advance(const CarControls& controls, absl::Duration duration,
                             const std::vector<ImageRequest>& requests, SimObservation* out) {
  CONVOY_RETURN_IF_ERROR(SetControls(controls));
  CONVOY_RETURN_IF_ERROR(ContinueForTime(duration));
  return Observe(requests, out);
}

}  // namespace convoy::sim
