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

}  // namespace convoy
