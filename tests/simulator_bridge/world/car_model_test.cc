#include "simulator_bridge/world/car_model.h"

#include <cmath>

#include "tests/catch.h"

namespace convoy::sim {
namespace {

CarParams NoResistance() {
  CarParams p;
  p.rolling_decel_mps2 = 0.0;
  p.drag_per_mps2 = 0.0;
  p.max_steer_rate_rad_s = 1e9;
  p.max_lateral_accel_mps2 = 1e9;
  return p;
}

TEST_CASE("full throttle from rest accelerates at max_accel and moves along the heading", "[car]") {
  CarParams p = NoResistance();
  CarKinematics car;
  car.yaw = M_PI / 2;  // east
  CarControls c;
  c.throttle = 1.0f;
  StepCar(p, c, 0.05, &car);
  // v1 = 3.5 * 0.05 = 0.175; position advances v1 * dt along +y.
  CHECK(car.speed == Approx(0.175));
  CHECK(car.x == Approx(0.0).margin(1e-12));
  CHECK(car.y == Approx(0.175 * 0.05));
  CHECK(car.accel == Approx(3.5));
}

TEST_CASE("drive force fades with speed and resistance slows a coasting car", "[car]") {
  CarParams p;  // with rolling resistance and drag
  CarKinematics car;
  car.speed = 10.0;
  CarControls c;
  c.throttle = 1.0f;
  StepCar(p, c, 0.1, &car);
  // v = 10 + 3.5 * (1 - 10/35) * 0.1 = 10.25, then - (0.3 + 0.0004 * 10.25^2) * 0.1.
  const double v = 10.0 + 3.5 * (1.0 - 10.0 / 35.0) * 0.1;
  CHECK(car.speed == Approx(v - (0.3 + 0.0004 * v * v) * 0.1));
  CarKinematics coast;
  coast.speed = 0.01;
  StepCar(p, CarControls{}, 0.1, &coast);
  CHECK(coast.speed == 0.0);  // resistance stops the car; it never reverses it
}

TEST_CASE("braking decelerates at max_brake_decel and stops at zero", "[car]") {
  CarParams p = NoResistance();
  CarKinematics car;
  car.speed = 9.0;
  CarControls c;
  c.brake = 1.0f;
  StepCar(p, c, 0.05, &car);
  CHECK(car.speed == Approx(9.0 - 8.0 * 0.05));
  for (int i = 0; i < 100; ++i) StepCar(p, c, 0.05, &car);
  CHECK(car.speed == 0.0);
}

TEST_CASE("steering follows the bicycle model with slip angle", "[car]") {
  CarParams p = NoResistance();
  CarKinematics car;
  car.speed = 5.0;
  CarControls c;
  c.steering = 0.5f;  // 15 degrees, right
  const double dt = 0.05;
  StepCar(p, c, dt, &car);
  const double delta = 0.5 * 0.5236;
  const double beta = std::atan(0.5 * std::tan(delta));
  const double yaw_rate = 5.0 * std::cos(beta) * std::tan(delta) / 2.7;
  CHECK(car.steer == Approx(delta));
  CHECK(car.yaw_rate == Approx(yaw_rate));
  CHECK(car.yaw == Approx(yaw_rate * dt));
  const double heading = 0.5 * yaw_rate * dt + beta;
  CHECK(car.x == Approx(5.0 * dt * std::cos(heading)));
  CHECK(car.y == Approx(5.0 * dt * std::sin(heading)));
  CHECK(car.y > 0.0);  // positive steering turns towards +y (east) from north
}

TEST_CASE("a full circle at constant steering has the bicycle model's radius", "[car]") {
  CarParams p = NoResistance();
  CarKinematics car;
  car.speed = 4.0;
  CarControls c;
  c.steering = 1.0f;
  c.throttle = 0.0f;
  const double delta = 0.5236;
  const double beta = std::atan(0.5 * std::tan(delta));
  const double radius = 2.7 / (std::cos(beta) * std::tan(delta));
  double max_y = 0.0;
  for (int i = 0; i < 4000; ++i) {
    StepCar(p, c, 0.005, &car);
    max_y = std::max(max_y, car.y);
  }
  // The centre moves at the slip angle beta to the heading, so the circle's centre sits at
  // (-R sin beta, R cos beta) and its easternmost point at R (1 + cos beta).
  CHECK(max_y == Approx(radius * (1.0 + std::cos(beta))).epsilon(0.002));
}

TEST_CASE("steering rate and tyre grip limit the wheel angle", "[car]") {
  CarParams p;
  CarKinematics car;
  CarControls c;
  c.steering = 1.0f;
  StepCar(p, c, 0.05, &car);
  CHECK(car.steer == Approx(1.2 * 0.05));  // rate-limited
  CarKinematics fast;
  fast.speed = 20.0;
  for (int i = 0; i < 40; ++i) StepCar(p, c, 0.05, &fast);
  const double v = fast.speed;
  CHECK(fast.steer <= std::atan(2.7 * 8.0 / (v * v)) + 0.1 * 0.05 + 1e-9);
}

TEST_CASE("reverse gear drives backwards up to the reverse limit", "[car]") {
  CarParams p;
  CarKinematics car;
  CarControls c;
  c.throttle = 1.0f;
  c.is_manual_gear = true;
  c.manual_gear = -1;
  for (int i = 0; i < 400; ++i) StepCar(p, c, 0.05, &car);
  CHECK(car.speed < -3.0);
  CHECK(car.speed >= -5.0);
  CHECK(car.x < 0.0);
}

}  // namespace
}  // namespace convoy::sim
