// ExpertDriver: the scripted baseline a learned policy is measured against (as highway-env's and
// MetaDrive's IDM drivers are). It reads the car's pose from the simulator, not the camera, and
// keeps to the road centre line, turning at junctions on an arc of 11 m (what the car's grip
// allows at the cookbook's 9 m/s), by pure pursuit of a point 9 m ahead on that path on a
// straight and 5 m ahead through a turn. It picks the
// nearest of the environment's steering actions (the cookbook's: it cannot brake at will either).
// At a junction it goes straight on where it can, else turns the way a hash of the junction and
// its road gives, so its route is a function of where it starts. It swerves left around a
// stalled car on the centre line (into the oncoming lane, where traffic waits for it), 2.4 m out.
// With a sight distance it knows a stalled car only once it is that close (as a camera sees one
// only once it is near enough to show), to measure how far ahead a driver must see to drive round
// them.
#ifndef CONVOY_SIMULATOR_BRIDGE_TASK_EXPERT_DRIVER_H_
#define CONVOY_SIMULATOR_BRIDGE_TASK_EXPERT_DRIVER_H_

#include <limits>
#include <vector>

#include "absl/status/statusor.h"
#include "simulator_bridge/task/driving_env.h"
#include "simulator_bridge/world/road_map.h"

namespace convoy::sim {

class ExpertDriver {
 public:
  explicit ExpertDriver(const RoadMap& map, double lookahead_m = 5.0, double turn_radius_m = 11.0,
                        double straight_lookahead_m = 5.0);

  // The action for the car as `env`'s simulator has it now, knowing the stalled cars within
  // `sight_m` of the car (infinity: every one). Errors: the simulator's.
  absl::StatusOr<int> Act(DrivingEnv& env,
                          double sight_m = std::numeric_limits<double>::infinity()) const;
  // The action for a car at (x, y) heading `yaw` (radians, NED) under `env_options`' actions,
  // with cars stalled at `stalled` (centres).
  int ActAt(double x, double y, double yaw, const DrivingEnvOptions& env_options,
            const std::vector<Vec2>& stalled = {}, double wheelbase_m = 2.7,
            double max_steer_rad = 0.5236) const;

 private:
  // The road a car is on, in the way it drives it.
  struct RoadAhead {
    int road = -1;
    double len = 0.0;  // the road's length
    Vec2 dir;          // unit, the way the car drives
    Vec2 start, end;   // the ends, in that order
    double t = 0.0;    // how far along the road the car is
    int node = -1;     // the node at `end`
  };

  // The road a car at (x, y) heading `yaw` is on: near, and running the way the car heads.
  RoadAhead RoadAt(double x, double y, double yaw) const;
  // The direction of the road it takes on from `road`'s end (its own at a dead end).
  Vec2 WayOn(const RoadAhead& road) const;
  // How far left of the centre line to steer `along` the road, past the stalled cars on it.
  static double SwerveOut(const RoadAhead& road, double along, const std::vector<Vec2>& stalled);
  // The point `along` the road's line that lies on the turn into `next`, or on `next` beyond it.
  Vec2 OnTurn(const RoadAhead& road, const Vec2& next, double cos_turn, double turn, double tangent,
              double along) const;
  // The action whose steering is nearest `steering` (in units of the steering limit).
  static int NearestAction(const DrivingEnvOptions& env_options, double steering);

  std::vector<Segment> roads_;
  std::vector<Vec2> nodes_;
  std::vector<std::pair<int, int>> ends_;  // each road's end nodes
  double lookahead_m_;
  double turn_radius_m_;
  double straight_lookahead_m_;
};

}  // namespace convoy::sim

#endif  // CONVOY_SIMULATOR_BRIDGE_TASK_EXPERT_DRIVER_H_
