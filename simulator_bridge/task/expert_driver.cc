#include "simulator_bridge/task/expert_driver.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "absl/strings/match.h"
#include "common/support/status_macros.h"
#include "simulator_bridge/world/car_sim.h"
#include "simulator_bridge/world/embedded_sim.h"

namespace convoy::sim {

ExpertDriver::ExpertDriver(const RoadMap& map, double lookahead_m, double turn_radius_m,
                           double straight_lookahead_m)
    : roads_(map.roads()),
      lookahead_m_(lookahead_m),
      turn_radius_m_(turn_radius_m),
      straight_lookahead_m_(straight_lookahead_m) {
  auto node_of = [this](const Vec2& p) {
    for (size_t n = 0; n < nodes_.size(); ++n) {
      if (std::hypot(nodes_[n].x - p.x, nodes_[n].y - p.y) < 0.01) return static_cast<int>(n);
    }
    nodes_.push_back(p);
    return static_cast<int>(nodes_.size()) - 1;
  };
  for (const Segment& s : roads_) ends_.emplace_back(node_of(s.a), node_of(s.b));
}

absl::StatusOr<int> ExpertDriver::Act(DrivingEnv& env, double sight_m) const {
  CONVOY_ASSIGN_OR_RETURN(const Pose pose, env.sim().GetPose());
  // Where the stalled cars are: the embedded simulator's scene (over AirSim the expert does not
  // know them), those within sight.
  std::vector<Vec2> stalled;
  if (const auto* sim = dynamic_cast<const EmbeddedSim*>(&env.sim()); sim != nullptr) {
    for (const Obstacle& o : sim->obstacles()) {
      if (absl::StartsWith(o.name, kStalledCarNamePrefix) &&
          std::hypot(o.center.x - pose.position.x_val, o.center.y - pose.position.y_val) <=
              sight_m) {
        stalled.push_back(o.center);
      }
    }
  }
  return ActAt(pose.position.x_val, pose.position.y_val, YawFromQuaternion(pose.orientation),
               env.options(), stalled);
}

int ExpertDriver::ActAt(double x, double y, double yaw, const DrivingEnvOptions& env_options,
                        const std::vector<Vec2>& stalled, double wheelbase_m,
                        double max_steer_rad) const {
  const RoadAhead road = RoadAt(x, y, yaw);
  const Vec2 next = WayOn(road);
  // The path: this road's centre line, an arc of turn_radius_m tangent to it and to the next
  // road's, then that one. The target is lookahead_m_ along it from the car.
  const double cos_turn = std::clamp(road.dir.x * next.x + road.dir.y * next.y, -1.0, 1.0);
  const double turn = std::acos(cos_turn);
  const double tangent = turn > 1e-3 ? turn_radius_m_ * std::tan(0.5 * turn) : 0.0;
  // Far ahead on a straight (steady), nearer through a turn (no corner cutting).
  const double along =
      road.t +
      (road.t + straight_lookahead_m_ <= road.len - tangent ? straight_lookahead_m_ : lookahead_m_);
  Vec2 target;
  if (along <= road.len - tangent || turn > 0.75 * M_PI) {
    const double out = SwerveOut(road, along, stalled);
    target = {road.start.x + along * road.dir.x + out * road.dir.y,
              road.start.y + along * road.dir.y - out * road.dir.x};
  } else {
    target = OnTurn(road, next, cos_turn, turn, tangent, along);
  }
  // Pure pursuit: the arc through the target point, as a steering angle.
  const double hx = std::cos(yaw), hy = std::sin(yaw);
  const double dx = target.x - x, dy = target.y - y;
  const double forward = dx * hx + dy * hy;
  const double right = -dx * hy + dy * hx;
  const double curvature = 2.0 * right / std::max(forward * forward + right * right, 1e-6);
  const double steering = std::atan(wheelbase_m * curvature) / max_steer_rad;
  return NearestAction(env_options, steering);
}

ExpertDriver::RoadAhead ExpertDriver::RoadAt(double x, double y, double yaw) const {
  const double hx = std::cos(yaw), hy = std::sin(yaw);
  // The road the car is on: near, and running the way the car heads.
  int road = -1;
  double best = std::numeric_limits<double>::infinity();
  double sign = 1.0;
  for (size_t r = 0; r < roads_.size(); ++r) {
    const Segment& s = roads_[r];
    const double len = std::hypot(s.b.x - s.a.x, s.b.y - s.a.y);
    const double along = ((s.b.x - s.a.x) * hx + (s.b.y - s.a.y) * hy) / len;
    const double cost = DistanceToSegment({x, y}, s) + 5.0 * (1.0 - std::abs(along));
    if (cost < best) {
      best = cost;
      road = static_cast<int>(r);
      sign = along >= 0.0 ? 1.0 : -1.0;
    }
  }
  const Segment& s = roads_[road];
  RoadAhead ahead;
  ahead.road = road;
  ahead.len = std::hypot(s.b.x - s.a.x, s.b.y - s.a.y);
  ahead.dir = {sign * (s.b.x - s.a.x) / ahead.len, sign * (s.b.y - s.a.y) / ahead.len};
  ahead.start = sign > 0 ? s.a : s.b;
  ahead.end = sign > 0 ? s.b : s.a;
  ahead.t = std::clamp((x - ahead.start.x) * ahead.dir.x + (y - ahead.start.y) * ahead.dir.y, 0.0,
                       ahead.len);
  ahead.node = sign > 0 ? ends_[road].second : ends_[road].first;
  return ahead;
}

Vec2 ExpertDriver::WayOn(const RoadAhead& road) const {
  // The road on from the end node: straight on if there is one, else a turn fixed per junction.
  std::vector<Vec2> ways;
  int straight = -1;
  for (size_t r = 0; r < roads_.size(); ++r) {
    if (static_cast<int>(r) == road.road) continue;
    Vec2 away;
    if (ends_[r].first == road.node) {
      away = {roads_[r].b.x - roads_[r].a.x, roads_[r].b.y - roads_[r].a.y};
    } else if (ends_[r].second == road.node) {
      away = {roads_[r].a.x - roads_[r].b.x, roads_[r].a.y - roads_[r].b.y};
    } else {
      continue;
    }
    const double n = std::hypot(away.x, away.y);
    away = {away.x / n, away.y / n};
    if (away.x * road.dir.x + away.y * road.dir.y > 0.9) straight = static_cast<int>(ways.size());
    ways.push_back(away);
  }
  if (ways.empty()) return road.dir;  // a dead end: aim straight on
  const uint64_t h = (static_cast<uint64_t>(road.node) * 0x9e3779b97f4a7c15ULL) ^
                     (static_cast<uint64_t>(road.road) * 0xbf58476d1ce4e5b9ULL);
  return ways[straight >= 0 ? straight : static_cast<int>((h >> 17) % ways.size())];
}

double ExpertDriver::SwerveOut(const RoadAhead& road, double along,
                               const std::vector<Vec2>& stalled) {
  // Out to the left past a stalled car on this road (into the oncoming lane, where traffic waits
  // for it): kSwerveM beside it, ramps either side.
  constexpr double kSwerveM = 2.4, kBesideM = 6.0, kRampM = 12.0;
  double out = 0.0;
  for (const Vec2& c : stalled) {
    const double a = (c.x - road.start.x) * road.dir.x + (c.y - road.start.y) * road.dir.y;
    const double off = -(c.x - road.start.x) * road.dir.y + (c.y - road.start.y) * road.dir.x;
    if (std::abs(off) > 1.0 || a < -kBesideM || a > road.len + kBesideM) continue;
    const double d = std::max(std::abs(along - a) - kBesideM, 0.0) / kRampM;
    out = std::max(out, kSwerveM * std::max(1.0 - d, 0.0));
  }
  return out;
}

Vec2 ExpertDriver::OnTurn(const RoadAhead& road, const Vec2& next, double cos_turn, double turn,
                          double tangent, double along) const {
  const Vec2& dir = road.dir;
  const Vec2 t1{road.end.x - tangent * dir.x, road.end.y - tangent * dir.y};
  const double arc = turn_radius_m_ * turn;
  const double on_arc = along - (road.len - tangent);
  if (on_arc < arc) {
    Vec2 side{next.x - cos_turn * dir.x, next.y - cos_turn * dir.y};
    const double n = std::hypot(side.x, side.y);
    side = {side.x / n, side.y / n};
    const double phi = on_arc / turn_radius_m_;
    // From t1 the arc starts along dir and bends towards side.
    return {t1.x + turn_radius_m_ * (std::sin(phi) * dir.x + (1.0 - std::cos(phi)) * side.x),
            t1.y + turn_radius_m_ * (std::sin(phi) * dir.y + (1.0 - std::cos(phi)) * side.y)};
  }
  const double beyond = tangent + (on_arc - arc);
  return {road.end.x + beyond * next.x, road.end.y + beyond * next.y};
}

int ExpertDriver::NearestAction(const DrivingEnvOptions& env_options, double steering) {
  int action = 0;
  double closest = std::numeric_limits<double>::infinity();
  for (size_t a = 0; a < env_options.actions.size(); ++a) {
    const double d = std::abs(env_options.actions[a].steering - steering);
    if (d < closest) {
      closest = d;
      action = static_cast<int>(a);
    }
  }
  return action;
}

}  // namespace convoy::sim
