// Kinematic bicycle model of a passenger car, advanced with a fixed time step. Pure arithmetic on
// doubles: the same inputs give bit-identical outputs on every run.
#ifndef CONVOY_SIMULATOR_BRIDGE_WORLD_CAR_MODEL_H_
#define CONVOY_SIMULATOR_BRIDGE_WORLD_CAR_MODEL_H_

#include "simulator_bridge/world/car_sim.h"

namespace convoy::sim {

// A mid-size sedan's limits.
struct CarParams {
  double wheelbase_m = 2.7;
  double length_m = 4.6;  // body, centred on the pose
  double width_m = 1.9;
  double max_steer_rad = 0.5236;        // 30 degrees at the front wheels, steering = +-1
  double max_steer_rate_rad_s = 1.2;    // steering actuator speed
  double max_lateral_accel_mps2 = 8.0;  // tyre grip: limits steering angle at speed
  double max_accel_mps2 = 3.5;          // full throttle from rest (0-100 km/h in about 9 s)
  double max_speed_mps = 35.0;          // drive force fades linearly to zero at this speed
  double max_reverse_speed_mps = 5.0;
  double max_brake_decel_mps2 = 8.0;  // brake = 1
  double handbrake_decel_mps2 = 5.0;
  double rolling_decel_mps2 = 0.3;  // rolling resistance and engine braking
  double drag_per_mps2 = 0.0004;    // aerodynamic drag: decel = drag * v^2
  double max_rpm = 7500.0;
  double idle_rpm = 900.0;
};

// The state the model integrates. Position is the body centre on the ground plane (NED x, y).
struct CarKinematics {
  double x = 0.0;
  double y = 0.0;
  double yaw = 0.0;
  double speed = 0.0;  // along the heading, m/s; negative when reversing
  double steer = 0.0;  // current front-wheel angle, rad
  double yaw_rate = 0.0;
  double accel = 0.0;  // longitudinal, from the last step
};

// One step of `dt` seconds under `controls`:
//   1. speed: drive = throttle * max_accel * (1 - |v| / v_max) in the gear's direction (reverse
//   when
//      is_manual_gear and manual_gear < 0, up to max_reverse_speed); then resistance (brake,
//      handbrake, rolling, drag) slows |v| towards 0 without changing its sign;
//   2. steering angle moves towards steering * max_steer at most max_steer_rate * dt, and is
//      limited to atan(wheelbase * max_lateral_accel / v^2);
//   3. pose: centre-referenced bicycle, slip angle beta = atan(tan(delta) / 2),
//      yaw rate = v cos(beta) tan(delta) / wheelbase, position advanced by v dt along
//      yaw + yaw_rate dt / 2 + beta, with the new speed.
void StepCar(const CarParams& params, const CarControls& controls, double dt, CarKinematics* car);

}  // namespace convoy::sim

#endif  // CONVOY_SIMULATOR_BRIDGE_WORLD_CAR_MODEL_H_
