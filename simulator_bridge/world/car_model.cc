#include "simulator_bridge/world/car_model.h"

#include <algorithm>
#include <cmath>

namespace convoy::sim {

void StepCar(const CarParams& p, const CarControls& controls, double dt, CarKinematics* car) {
  const double throttle = std::clamp(static_cast<double>(controls.throttle), 0.0, 1.0);
  const double brake = std::clamp(static_cast<double>(controls.brake), 0.0, 1.0);
  const double steering = std::clamp(static_cast<double>(controls.steering), -1.0, 1.0);
  const bool reverse = controls.is_manual_gear && controls.manual_gear < 0;

  const double v0 = car->speed;
  double v = v0;
  const double direction = reverse ? -1.0 : 1.0;
  const double v_limit = reverse ? p.max_reverse_speed_mps : p.max_speed_mps;
  // Drive force fades to zero at the gear's speed limit; it never acts against the wheels' motion
  // beyond stopping (a forward gear on a car rolling backwards works as a brake).
  const double along = direction * v;  // speed in the gear's direction
  const double fade = along > 0.0 ? std::max(0.0, 1.0 - along / v_limit) : 1.0;
  v += direction * throttle * p.max_accel_mps2 * fade * dt;
  const double resist = brake * p.max_brake_decel_mps2 +
                        (controls.handbrake ? p.handbrake_decel_mps2 : 0.0) + p.rolling_decel_mps2 +
                        p.drag_per_mps2 * v * v;
  if (v > 0.0) {
    v = std::max(0.0, v - resist * dt);
  } else if (v < 0.0) {
    v = std::min(0.0, v + resist * dt);
  }
  car->accel = (v - v0) / dt;
  car->speed = v;

  double target = steering * p.max_steer_rad;
  if (v * v > 1e-9) {
    const double grip_limit = std::atan(p.wheelbase_m * p.max_lateral_accel_mps2 / (v * v));
    target = std::clamp(target, -grip_limit, grip_limit);
  }
  const double max_change = p.max_steer_rate_rad_s * dt;
  car->steer += std::clamp(target - car->steer, -max_change, max_change);

  const double tan_delta = std::tan(car->steer);
  const double beta = std::atan(0.5 * tan_delta);
  car->yaw_rate = v * std::cos(beta) * tan_delta / p.wheelbase_m;
  const double heading = car->yaw + 0.5 * car->yaw_rate * dt + beta;
  car->x += v * dt * std::cos(heading);
  car->y += v * dt * std::sin(heading);
  car->yaw = std::remainder(car->yaw + car->yaw_rate * dt, 2.0 * M_PI);
}

}  // namespace convoy::sim
