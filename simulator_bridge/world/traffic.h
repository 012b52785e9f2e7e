// Traffic: other cars driving the World's roads around an EmbeddedSim's car. Each keeps to the
// right lane of its road (a lane graph built from the road segments: two directed lanes per road,
// joined at every junction by turning curves), follows the car ahead with the Intelligent Driver
// Model, and yields:
//   - at a junction: one traffic car at a time crosses it, and none enters while the ego car is in
//     it or coming towards it within `ego_clearance_m`;
//   - at a parked car standing in its lane: it swings out towards the road centre to pass, and
//     waits before doing so while the ego car (which drives the centre line) is near;
//   - at a stalled car on the road centre: it waits before driving by while the ego car is near,
//     leaving the ego car the lane to swerve into.
// The ego car counts as a car to follow when it stands ahead in a traffic car's lane. Traffic does
// not collide with traffic; the ego car can hit it. Deterministic for a seed, allocation-free after
// construction.
#ifndef CONVOY_SIMULATOR_BRIDGE_WORLD_TRAFFIC_H_
#define CONVOY_SIMULATOR_BRIDGE_WORLD_TRAFFIC_H_

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "simulator_bridge/world/world.h"

namespace convoy::sim {

struct TrafficOptions {
  int cars = 0;
  double lane_offset_m = 2.6;           // lane centre, right of the road centre
  double pass_offset_m = 1.25;          // from the road centre, passing a parked car
  double half_width_m = 0.85;           // of a traffic car (1.7 m wide, 4.6 m long)
  double desired_speed_mps = 7.5;       // IDM v0
  double max_accel_mps2 = 1.5;          // IDM a
  double comfortable_decel_mps2 = 2.5;  // IDM b
  double min_gap_m = 2.0;               // IDM s0
  double time_headway_s = 1.2;          // IDM T
  double junction_setback_m = 12.0;     // where a lane ends before a junction's centre
  // A junction waits while the ego car is this near; a pass, while it is nearer than
  // pass_clearance_m plus 1.5 times the pass's length (the ego car is the faster).
  double ego_clearance_m = 90.0;
  double pass_clearance_m = 30.0;
};

// The car the traffic drives around, as the traffic sees it.
struct EgoCar {
  double x = 0.0;
  double y = 0.0;
  double yaw = 0.0;
  double speed = 0.0;
  double half_length = 2.3;
  double half_width = 0.9;
};

// The names of traffic cars: this prefix and their number (1-based); their object ids are that
// number plus kTrafficCarIdBase, apart from the parked cars'.
inline constexpr char kTrafficCarNamePrefix[] = "TrafficCar_";
inline constexpr int32_t kTrafficCarIdBase = 100000;

class Traffic {
 public:
  // Lanes from `world`'s roads, bent around `parked` cars that stand in them.
  Traffic(const World& world, const std::vector<Obstacle>& parked, const TrafficOptions& options);

  // The cars standing on the road centre (stalled cars), replacing any given before: traffic holds
  // back from driving by one while the ego car is near it. Call Reset or MakeRoom after.
  void SetBlockers(const Obstacle* stalled, int count);
  // Places options.cars cars on the lanes, as a function of `seed` only.
  void Reset(uint64_t seed);
  // Moves every car within `radius` of `place` to a free place elsewhere (where the ego car was
  // just put down).
  void MakeRoom(const Vec2& place, double radius);
  // Advances every car by dt seconds.
  void Step(double dt, const EgoCar& ego);
  // The cars as boxes: name, id, centre, yaw and size are written into out[0, size()).
  void WriteBoxes(Obstacle* out) const;
  int size() const { return static_cast<int>(cars_.size()); }
  // A car's speed, m/s.
  double speed(int i) const { return cars_[i].speed; }

  // Where car i is: its path, arc length on it and the junction it holds (-1: none).
  std::string DebugString(int i) const;
  // The lane graph's size, for tests and the documentation.
  int num_lanes() const { return num_lanes_; }
  int num_paths() const { return static_cast<int>(paths_.size()); }

 private:
  // A polyline a car drives along: a lane or a turning curve through a junction.
  struct Path {
    std::vector<Vec2> points;
    std::vector<double> s;  // arc length at each point
    double length = 0.0;
    int node = -1;          // the junction a turning curve crosses (-1 for a lane)
    std::vector<int> next;  // paths that may follow
    // Stretches where the path leaves its lane to pass a parked car: [begin, end) in arc length.
    std::vector<std::pair<double, double>> narrows;
    // Stretches beside a stalled car on the road centre, which it drives by only while the ego
    // car is far: [begin, end) in arc length.
    std::vector<std::pair<double, double>> holds;
  };
  struct Car {
    int path = 0;
    double s = 0.0;
    double speed = 0.0;
    int next = -1;         // the path chosen to follow this one
    int holds = -1;        // the junction node it holds
    bool crossed = false;  // it has driven through the junction it holds
    bool passing = false;  // it is out of its lane, passing a parked car
    double x = 0.0, y = 0.0, yaw = 0.0;
    uint8_t bgr[3] = {0, 0, 0};
  };

  // The road network while the lanes are built (traffic.cc).
  struct RoadGraph;
  // The nearest of what a car must follow (traffic.cc).
  struct Nearest;

  // The nodes where `roads` end and meet, and which of them are junctions.
  void FindNodes(const std::vector<Segment>& roads, RoadGraph* graph);
  // Two lanes per road, one each way, bent around `parked` cars that stand in them.
  void AddLanes(const std::vector<Segment>& roads, const std::vector<Obstacle>& parked,
                RoadGraph* graph);
  // The lane from node `from` to node `to`, `start` to `start` + `length` along the road.
  Path MakeLane(int from, int to, double start, double length,
                const std::vector<Obstacle>& parked) const;
  // What follows each lane: the lane on, or a turning curve per way through a junction.
  void JoinLanes(const RoadGraph& graph);
  // The turning curve through junction `node` from the lane with points `a` to that with `b`.
  static Path MakeTurn(int node, const std::vector<Vec2>& a, const std::vector<Vec2>& b);

  void Locate(Car& car) const;
  void ChooseNext(Car& car);
  // The gap to and speed of what car `i` must follow (a car ahead on its route, the ego car, or a
  // stop line it may not pass yet); false when nothing is within sight.
  bool Leader(int i, const EgoCar& ego, double* gap, double* leader_speed);
  // The parts of Leader for path `p`, `offset` ahead of the car along its route: the passes it
  // may not start yet, the stalled cars' holds it may not drive into yet, and the junction after
  // it (which the car takes when it may: hence not const).
  void StopBeforePasses(const EgoCar& ego, const Path& p, double offset, bool junction_next,
                        Nearest* nearest) const;
  void StopBeforeHolds(const EgoCar& ego, const Path& p, double offset, Nearest* nearest) const;
  void ApproachJunction(int i, const EgoCar& ego, const Path& p, int next, double offset,
                        bool first_in_line, Nearest* nearest);
  // The ego car, where it stands in `car`'s way.
  void FollowEgo(const Car& car, const EgoCar& ego, Nearest* nearest) const;
  bool EgoNear(const EgoCar& ego, const Vec2& place, double clearance) const;
  // Puts *car at a random free place on a lane (not `self`'s own spot), at least `radius` from
  // *avoid when given; false when the draw was not free.
  bool Place(Car* car, int self, const Vec2* avoid, double radius);
  // Whether the ego car is further than `clearance` from both ends of [begin, end) of `path`
  // (or clearly leaving them).
  bool EgoClearOf(const EgoCar& ego, const Path& path, double begin, double end,
                  double clearance) const;
  // Whether a car may start on the pass [begin, end) of `path`: the ego car is not near it.
  bool MayPass(const EgoCar& ego, const Path& path, double begin, double end) const;
  // Whether a car may drive by the stalled car of the hold [begin, end) of `path`: the ego car is
  // not within ego_clearance_m plus the hold's length of it.
  bool MayDriveBy(const EgoCar& ego, const Path& path, double begin, double end) const;
  // Whether it may drive by every hold of `path` that begins in [from, to).
  bool MayDriveByHolds(const EgoCar& ego, const Path& path, double from, double to) const;

  TrafficOptions options_;
  std::vector<Path> paths_;
  std::vector<Vec2> nodes_;
  int num_lanes_ = 0;
  std::vector<int> node_holder_;  // the car holding each junction node, or -1
  std::vector<Car> cars_;
  std::mt19937_64 rng_;
};

}  // namespace convoy::sim

#endif  // CONVOY_SIMULATOR_BRIDGE_WORLD_TRAFFIC_H_
