#include "simulator_bridge/world/traffic.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace convoy::sim {
namespace {

constexpr double kNodeMergeM = 0.01;
constexpr double kSampleM = 1.0;         // lane polyline spacing
constexpr double kPassHalfM = 5.0;       // beside the parked car, at pass_offset
constexpr double kPassRampM = 10.0;      // swinging out and back in
constexpr double kTurnSpeedMps = 5.0;    // IDM v0 on a turning curve
constexpr double kSightM = 60.0;         // how far ahead a car looks for what to follow
constexpr double kCarHalfLengthM = 2.3;  // of a traffic car
constexpr double kMaxDecelMps2 = 9.0;
constexpr int kCurvePoints = 12;
constexpr double kApproachM = 15.0;  // a placed car's room to stop, at 6 m/s and up to 2.5 m/s^2

double Uniform(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }
double Dot(const Vec2& a, const Vec2& b) { return a.x * b.x + a.y * b.y; }
Vec2 Sub(const Vec2& a, const Vec2& b) { return {a.x - b.x, a.y - b.y}; }
Vec2 Unit(const Vec2& v) {
  const double n = std::hypot(v.x, v.y);
  return n > 1e-12 ? Vec2{v.x / n, v.y / n} : Vec2{1.0, 0.0};
}

}  // namespace

// The road network while the lanes are built: which nodes each road joins and which lanes meet
// at each node.
struct Traffic::RoadGraph {
  struct LaneEnd {
    int path;
    int road;
  };
  std::vector<std::pair<int, int>> ends;   // each road's end nodes
  std::vector<std::vector<int>> roads_at;  // the roads that meet at each node
  // A node where exactly two roads meet straight on is no junction: its lanes run through.
  std::vector<bool> junction;
  std::vector<std::vector<LaneEnd>> into, out_of;  // the lanes that end and start at each node
};

Traffic::Traffic(const World& world, const std::vector<Obstacle>& parked,
                 const TrafficOptions& options)
    : options_(options) {
  const std::vector<Segment>& roads = world.map().roads();
  RoadGraph graph;
  FindNodes(roads, &graph);
  AddLanes(roads, parked, &graph);
  num_lanes_ = static_cast<int>(paths_.size());
  JoinLanes(graph);
  for (Path& path : paths_) {
    path.s.assign(path.points.size(), 0.0);
    for (size_t i = 1; i < path.points.size(); ++i) {
      path.s[i] = path.s[i - 1] + std::hypot(path.points[i].x - path.points[i - 1].x,
                                             path.points[i].y - path.points[i - 1].y);
    }
    path.length = path.s.back();
  }
  node_holder_.assign(nodes_.size(), -1);
  cars_.reserve(static_cast<size_t>(std::max(options_.cars, 0)));
}

void Traffic::FindNodes(const std::vector<Segment>& roads, RoadGraph* graph) {
  // Nodes: road ends that meet.
  auto node_of = [this](const Vec2& p) {
    for (size_t n = 0; n < nodes_.size(); ++n) {
      if (std::hypot(nodes_[n].x - p.x, nodes_[n].y - p.y) < kNodeMergeM)
        return static_cast<int>(n);
    }
    nodes_.push_back(p);
    return static_cast<int>(nodes_.size()) - 1;
  };
  std::vector<std::pair<int, int>>& ends = graph->ends;
  for (const Segment& r : roads) ends.emplace_back(node_of(r.a), node_of(r.b));
  std::vector<std::vector<int>>& roads_at = graph->roads_at;
  roads_at.resize(nodes_.size());
  for (size_t r = 0; r < roads.size(); ++r) {
    roads_at[ends[r].first].push_back(static_cast<int>(r));
    roads_at[ends[r].second].push_back(static_cast<int>(r));
  }
  auto away = [&](int road, int node) {  // unit direction of `road` leaving `node`
    const Segment& s = roads[road];
    return ends[road].first == node ? Unit(Sub(s.b, s.a)) : Unit(Sub(s.a, s.b));
  };
  graph->junction.assign(nodes_.size(), true);
  for (size_t n = 0; n < nodes_.size(); ++n) {
    if (roads_at[n].size() == 2 &&
        Dot(away(roads_at[n][0], static_cast<int>(n)), away(roads_at[n][1], static_cast<int>(n))) <
            -std::cos(30.0 * M_PI / 180.0)) {
      graph->junction[n] = false;
    }
  }
  graph->into.resize(nodes_.size());
  graph->out_of.resize(nodes_.size());
}

void Traffic::AddLanes(const std::vector<Segment>& roads, const std::vector<Obstacle>& parked,
                       RoadGraph* graph) {
  auto setback = [&](int node) {
    return graph->junction[node] ? options_.junction_setback_m : 0.0;
  };
  // Lanes: two per road, offset to the right of their direction, bent around parked cars.
  for (size_t r = 0; r < roads.size(); ++r) {
    for (int reverse = 0; reverse < 2; ++reverse) {
      const int from = reverse ? graph->ends[r].second : graph->ends[r].first;
      const int to = reverse ? graph->ends[r].first : graph->ends[r].second;
      const double start = setback(from);
      const double length =
          std::hypot(nodes_[to].x - nodes_[from].x, nodes_[to].y - nodes_[from].y) - start -
          setback(to);
      if (length < 2.0 * kSampleM) continue;
      const int id = static_cast<int>(paths_.size());
      paths_.push_back(MakeLane(from, to, start, length, parked));
      graph->out_of[from].push_back({id, static_cast<int>(r)});
      graph->into[to].push_back({id, static_cast<int>(r)});
    }
  }
}

Traffic::Path Traffic::MakeLane(int from, int to, double start, double length,
                                const std::vector<Obstacle>& parked) const {
  const Vec2 dir = Unit(Sub(nodes_[to], nodes_[from]));
  const Vec2 right{-dir.y, dir.x};  // NED: x north, y east, so right of north is east
  std::vector<double> in_lane;      // parked cars standing in this lane, by arc length
  for (const Obstacle& o : parked) {
    const Vec2 d = Sub(o.center, nodes_[from]);
    const double a = Dot(d, dir) - start;
    const double lateral = Dot(d, right);
    if (std::abs(lateral - options_.lane_offset_m) < options_.half_width_m + o.half_width + 0.2 &&
        a > -kPassHalfM - kPassRampM && a < length + kPassHalfM + kPassRampM) {
      in_lane.push_back(a);
    }
  }
  std::sort(in_lane.begin(), in_lane.end());
  Path lane;
  const int samples = static_cast<int>(std::ceil(length / kSampleM));
  for (int k = 0; k <= samples; ++k) {
    const double s = length * k / samples;
    double offset = options_.lane_offset_m;
    for (double a : in_lane) {
      const double d = std::max(std::abs(s - a) - kPassHalfM, 0.0) / kPassRampM;
      if (d < 1.0) {
        offset = std::min(
            offset, options_.pass_offset_m + d * (options_.lane_offset_m - options_.pass_offset_m));
      }
    }
    const double along = start + s;
    lane.points.push_back({nodes_[from].x + along * dir.x + offset * right.x,
                           nodes_[from].y + along * dir.y + offset * right.y});
  }
  for (double a : in_lane) {
    const double begin = std::max(a - kPassHalfM - kPassRampM, 0.0);
    const double end = std::min(a + kPassHalfM + kPassRampM, length);
    if (!lane.narrows.empty() && begin <= lane.narrows.back().second) {
      lane.narrows.back().second = end;
    } else {
      lane.narrows.emplace_back(begin, end);
    }
  }
  return lane;
}

void Traffic::JoinLanes(const RoadGraph& graph) {
  // Through a node: straight on where it is no junction, else a curve per way through it.
  for (size_t n = 0; n < nodes_.size(); ++n) {
    for (const RoadGraph::LaneEnd& in : graph.into[n]) {
      const bool dead_end = graph.roads_at[n].size() == 1;
      for (const RoadGraph::LaneEnd& out : graph.out_of[n]) {
        if (out.road == in.road && !dead_end) continue;  // no U-turns but at a dead end
        if (!graph.junction[n]) {
          paths_[in.path].next.push_back(out.path);
          continue;
        }
        Path curve = MakeTurn(static_cast<int>(n), paths_[in.path].points, paths_[out.path].points);
        curve.next.push_back(out.path);
        paths_[in.path].next.push_back(static_cast<int>(paths_.size()));
        paths_.push_back(std::move(curve));
      }
    }
  }
}

Traffic::Path Traffic::MakeTurn(int node, const std::vector<Vec2>& a, const std::vector<Vec2>& b) {
  const Vec2 p0 = a.back(), p3 = b.front();
  const Vec2 d0 = Unit(Sub(a.back(), a[a.size() - 2]));
  const Vec2 d3 = Unit(Sub(b[1], b.front()));
  // Control points towards where the two lanes' lines cross, so that a turn keeps inside the
  // junction (a right turn does not cut the corner's curb); straight on, a third of the way each.
  const Vec2 r = Sub(p3, p0);
  const double cross = d0.x * d3.y - d0.y * d3.x;
  double k0 = std::hypot(r.x, r.y) / 3.0, k3 = k0;
  if (std::abs(cross) > 0.1) {
    const double to_cross0 = (r.x * d3.y - r.y * d3.x) / cross;
    const double to_cross3 = (d0.x * r.y - d0.y * r.x) / cross;
    if (to_cross0 > 0.0 && to_cross3 > 0.0) {
      k0 = 0.9 * to_cross0;
      k3 = 0.9 * to_cross3;
    }
  }
  const Vec2 p1{p0.x + k0 * d0.x, p0.y + k0 * d0.y};
  const Vec2 p2{p3.x - k3 * d3.x, p3.y - k3 * d3.y};
  Path curve;
  curve.node = node;
  for (int i = 0; i <= kCurvePoints; ++i) {
    const double t = static_cast<double>(i) / kCurvePoints, u = 1.0 - t;
    const double w0 = u * u * u, w1 = 3 * u * u * t, w2 = 3 * u * t * t, w3 = t * t * t;
    curve.points.push_back({w0 * p0.x + w1 * p1.x + w2 * p2.x + w3 * p3.x,
                            w0 * p0.y + w1 * p1.y + w2 * p2.y + w3 * p3.y});
  }
  return curve;
}

void Traffic::SetBlockers(const Obstacle* stalled, int count) {
  for (int p = 0; p < num_lanes_; ++p) {
    Path& lane = paths_[p];
    lane.holds.clear();
    const Vec2 dir = Unit(Sub(lane.points.back(), lane.points.front()));
    const Vec2 right{-dir.y, dir.x};
    for (int k = 0; k < count; ++k) {
      const Vec2 d = Sub(stalled[k].center, lane.points.front());
      const double a = Dot(d, dir);
      // On this lane's road: its centre line lies lane_offset_m to the lane's left.
      if (std::abs(Dot(d, right) + options_.lane_offset_m) > 1.0) continue;
      if (a < -kPassHalfM || a > lane.length + kPassHalfM) continue;
      lane.holds.emplace_back(std::max(a - kPassHalfM - kPassRampM, 0.0),
                              std::min(a + kPassHalfM + kPassRampM, lane.length));
    }
    std::sort(lane.holds.begin(), lane.holds.end());
  }
}

void Traffic::Reset(uint64_t seed) {
  rng_.seed(seed);
  cars_.clear();
  std::fill(node_holder_.begin(), node_holder_.end(), -1);
  if (num_lanes_ == 0) return;
  static constexpr uint8_t kPaint[][3] = {{30, 30, 190}, {190, 110, 20}, {230, 230, 230},
                                          {25, 25, 25},  {40, 170, 230}, {140, 140, 140},
                                          {40, 130, 50}, {150, 40, 120}};
  for (int attempt = 0; attempt < 100 * options_.cars && size() < options_.cars; ++attempt) {
    Car car;
    if (!Place(&car, -1, nullptr, 0.0)) continue;
    const auto& paint = kPaint[rng_() % (sizeof(kPaint) / sizeof(kPaint[0]))];
    std::copy(paint, paint + 3, car.bgr);
    cars_.push_back(car);
  }
}

void Traffic::MakeRoom(const Vec2& place, double radius) {
  for (int i = 0; i < size(); ++i) {
    Car& car = cars_[i];
    if (std::hypot(car.x - place.x, car.y - place.y) >= radius) continue;
    if (car.holds >= 0) node_holder_[car.holds] = -1;
    for (int attempt = 0; attempt < 100; ++attempt) {
      if (Place(&car, i, &place, radius)) break;
    }
  }
}

bool Traffic::Place(Car* car, int self, const Vec2* avoid, double radius) {
  constexpr double kHalfLength = 2.3, kSpacingM = 14.0;
  double total = 0.0;
  for (int p = 0; p < num_lanes_; ++p) total += paths_[p].length;
  double pick = Uniform(rng_) * total;
  int p = 0;
  while (p + 1 < num_lanes_ && pick > paths_[p].length) pick -= paths_[p++].length;
  const Path& lane = paths_[p];
  if (lane.length < 2 * kHalfLength + 2.0) return false;
  const double s = kHalfLength + 1.0 + Uniform(rng_) * (lane.length - 2 * kHalfLength - 2.0);
  // Not where it could no longer stop before a junction or a pass it has not been let into: put
  // down at speed there, it would run into either unasked.
  if (s > lane.length - kHalfLength - kApproachM) return false;
  for (const auto* zones : {&lane.narrows, &lane.holds}) {
    for (const auto& [begin, end] : *zones) {
      if (s > begin - kHalfLength - kApproachM && s < end + kHalfLength) return false;
    }
  }
  for (int j = 0; j < size(); ++j) {
    if (j != self && cars_[j].path == p && std::abs(cars_[j].s - s) < kSpacingM) return false;
  }
  Car placed = *car;
  placed.path = p;
  placed.s = s;
  placed.speed = 0.8 * options_.desired_speed_mps;
  placed.holds = -1;
  placed.crossed = false;
  placed.passing = false;
  Locate(placed);
  if (avoid != nullptr && std::hypot(placed.x - avoid->x, placed.y - avoid->y) < radius) {
    return false;
  }
  ChooseNext(placed);
  *car = placed;
  return true;
}

void Traffic::ChooseNext(Car& car) {
  const std::vector<int>& next = paths_[car.path].next;
  car.next = next.empty() ? -1 : next[rng_() % next.size()];
}

void Traffic::Locate(Car& car) const {
  const Path& path = paths_[car.path];
  const double s = std::clamp(car.s, 0.0, path.length);
  size_t i = std::upper_bound(path.s.begin(), path.s.end(), s) - path.s.begin();
  i = std::clamp<size_t>(i, 1, path.points.size() - 1);
  const Vec2& a = path.points[i - 1];
  const Vec2& b = path.points[i];
  const double span = path.s[i] - path.s[i - 1];
  const double t = span > 1e-9 ? (s - path.s[i - 1]) / span : 0.0;
  car.x = a.x + t * (b.x - a.x);
  car.y = a.y + t * (b.y - a.y);
  car.yaw = std::atan2(b.y - a.y, b.x - a.x);
}

bool Traffic::EgoNear(const EgoCar& ego, const Vec2& place, double clearance) const {
  const double dx = place.x - ego.x, dy = place.y - ego.y;
  const double d = std::hypot(dx, dy);
  if (d > clearance) return false;
  if (d < options_.junction_setback_m + ego.half_length + 1.0) return true;  // in it
  // Near unless clearly leaving: heading more than 120 degrees away from the place.
  return dx * std::cos(ego.yaw) + dy * std::sin(ego.yaw) > -0.5 * d;
}

bool Traffic::EgoClearOf(const EgoCar& ego, const Path& path, double begin, double end,
                         double clearance) const {
  auto at = [&path](double s) {
    return path.points[std::min<size_t>(static_cast<size_t>(s / kSampleM), path.points.size() - 1)];
  };
  return !EgoNear(ego, at(begin), clearance) && !EgoNear(ego, at(end), clearance);
}

bool Traffic::MayPass(const EgoCar& ego, const Path& path, double begin, double end) const {
  // The ego car drives faster than traffic: it must be further off than the pass is long.
  return EgoClearOf(ego, path, begin, end, options_.pass_clearance_m + 1.5 * (end - begin));
}

bool Traffic::MayDriveBy(const EgoCar& ego, const Path& path, double begin, double end) const {
  // As a junction's clearance: a car let in from one may be slow (turning) before it gets by.
  return EgoClearOf(ego, path, begin, end, options_.ego_clearance_m + (end - begin));
}

bool Traffic::MayDriveByHolds(const EgoCar& ego, const Path& path, double from, double to) const {
  for (const auto& [begin, end] : path.holds) {
    if (begin >= from && begin < to && !MayDriveBy(ego, path, begin, end)) return false;
  }
  return true;
}

// The nearest of what a car must follow, as Leader gathers it: nothing within sight at first.
struct Traffic::Nearest {
  double gap = kSightM;
  double speed = 0.0;
  void Consider(double g, double v) {
    if (g < gap) {
      gap = g;
      speed = v;
    }
  }
};

bool Traffic::Leader(int i, const EgoCar& ego, double* gap, double* leader_speed) {
  Car& car = cars_[i];
  Nearest nearest;
  // Cars ahead on the route: this path, then the next one or two.
  int path = car.path;
  int next = car.next;
  double offset = -car.s;  // arc length from this car to the start of `path`
  bool first_in_lane = true;
  for (int depth = 0; depth < 3 && path >= 0 && offset < kSightM; ++depth) {
    for (int j = 0; j < size(); ++j) {
      if (j == i || cars_[j].path != path) continue;
      const double ahead = offset + cars_[j].s;
      if (ahead > 0.0) {
        nearest.Consider(ahead - 2 * kCarHalfLengthM, cars_[j].speed);
        if (depth == 0) first_in_lane = false;
      }
    }
    const Path& p = paths_[path];
    const bool junction_next = next >= 0 && paths_[next].node >= 0;
    StopBeforePasses(ego, p, offset, junction_next, &nearest);
    // A car in a junction goes on (it was let in only with the ego car far off: see below).
    if (paths_[car.path].node < 0) StopBeforeHolds(ego, p, offset, &nearest);
    if (junction_next) {
      ApproachJunction(i, ego, p, next, offset, depth == 0 && first_in_lane, &nearest);
    }
    offset += p.length;
    path = next;
    next = (path >= 0 && paths_[path].next.size() == 1) ? paths_[path].next[0] : -1;
  }
  FollowEgo(car, ego, &nearest);
  if (nearest.gap >= kSightM) return false;
  *gap = nearest.gap;
  *leader_speed = nearest.speed;
  return true;
}

void Traffic::StopBeforePasses(const EgoCar& ego, const Path& p, double offset, bool junction_next,
                               Nearest* nearest) const {
  // Where it may not go on yet: a parked car to pass while the ego car is near. A pass that
  // starts a lane or runs into a junction is the junction's: it is decided with it
  // (ApproachJunction), so that no car waits out of its lane.
  for (const auto& [begin, end] : p.narrows) {
    if (begin < 1.0 || (junction_next && end > p.length - 1.0)) continue;
    const double to_begin = offset + begin;
    if (to_begin - kCarHalfLengthM >= 0.0 && to_begin < 20.0 &&
        (!MayPass(ego, p, begin, end) || !MayDriveByHolds(ego, p, begin, end + 20.0))) {
      // Nor a pass that would end waiting at a stalled car's hold, out of its lane.
      nearest->Consider(to_begin - kCarHalfLengthM, 0.0);
    }
  }
}

void Traffic::StopBeforeHolds(const EgoCar& ego, const Path& p, double offset,
                              Nearest* nearest) const {
  // A stalled car on the road centre: the ego car swerves into this lane to get by it.
  for (const auto& [begin, end] : p.holds) {
    const double to_begin = offset + begin;
    if (to_begin - kCarHalfLengthM >= 0.0 && to_begin < 20.0 && !MayDriveBy(ego, p, begin, end)) {
      nearest->Consider(to_begin - kCarHalfLengthM, 0.0);
    }
  }
}

void Traffic::ApproachJunction(int i, const EgoCar& ego, const Path& p, int next, double offset,
                               bool first_in_line, Nearest* nearest) {
  // A junction it does not hold yet: the first car in line takes it when it is free, the ego car
  // is not near it (nor near a pass on either side of it) and there is room beyond it.
  Car& car = cars_[i];
  const int node = paths_[next].node;
  const Path& out = paths_[paths_[next].next[0]];
  double stop_at = p.length;
  bool clear = !EgoNear(ego, nodes_[node], options_.ego_clearance_m);
  for (const auto& [begin, end] : p.narrows) {
    if (end > p.length - 1.0) {
      stop_at = std::min(stop_at, begin);
      clear = clear && MayPass(ego, p, begin, end);
    }
  }
  for (const auto& [begin, end] : out.narrows) {
    if (begin < 1.0) clear = clear && MayPass(ego, out, begin, end);
  }
  // Nor when it would have to wait for a stalled car's hold before it is out of the junction.
  for (const auto& [begin, end] : out.holds) {
    if (begin < 30.0) clear = clear && MayDriveBy(ego, out, begin, end);
  }
  const double to_stop = offset + stop_at;
  if (car.holds != node && to_stop < 25.0) {
    for (int j = 0; j < size(); ++j) {
      if (cars_[j].path == paths_[next].next[0] && cars_[j].s < 2 * kCarHalfLengthM + 2.0) {
        clear = false;
      }
    }
    if (first_in_line && car.holds < 0 && clear && node_holder_[node] < 0) {
      node_holder_[node] = i;
      car.holds = node;
    } else {
      nearest->Consider(to_stop - kCarHalfLengthM, 0.0);
    }
  }
}

void Traffic::FollowEgo(const Car& car, const EgoCar& ego, Nearest* nearest) const {
  // The ego car, where it stands in this car's way.
  const double c = std::cos(car.yaw), s = std::sin(car.yaw);
  const double dx = (ego.x - car.x) * c + (ego.y - car.y) * s;
  const double dy = -(ego.x - car.x) * s + (ego.y - car.y) * c;
  if (!(dx > 0.0 && dx < kSightM)) return;
  const double heading = std::remainder(ego.yaw - car.yaw, 2.0 * M_PI);
  const bool same_way = std::abs(heading) < 0.5 * M_PI;
  // Meeting it head-on while passing a parked car, braking would only leave the car in its way.
  if (std::abs(dy) < options_.half_width_m + ego.half_width + (same_way ? 0.3 : 0.1) &&
      (same_way || !car.passing)) {
    nearest->Consider(dx - kCarHalfLengthM - ego.half_length,
                      same_way ? std::max(0.0, ego.speed * std::cos(heading)) : 0.0);
  }
}

void Traffic::Step(double dt, const EgoCar& ego) {
  const TrafficOptions& o = options_;
  for (int i = 0; i < size(); ++i) {
    Car& car = cars_[i];
    const double v0 = paths_[car.path].node >= 0 ? kTurnSpeedMps : o.desired_speed_mps;
    double accel = o.max_accel_mps2 * (1.0 - std::pow(car.speed / v0, 4));
    double gap, leader_speed;
    if (Leader(i, ego, &gap, &leader_speed)) {
      const double wanted =
          o.min_gap_m +
          std::max(0.0, car.speed * o.time_headway_s +
                            car.speed * (car.speed - leader_speed) /
                                (2.0 * std::sqrt(o.max_accel_mps2 * o.comfortable_decel_mps2)));
      const double ratio = wanted / std::max(gap, 0.1);
      accel -= o.max_accel_mps2 * ratio * ratio;
    }
    accel = std::clamp(accel, -kMaxDecelMps2, o.max_accel_mps2);
    car.speed = std::max(0.0, car.speed + accel * dt);
    car.s += car.speed * dt;
    while (car.s > paths_[car.path].length && car.next >= 0) {
      car.s -= paths_[car.path].length;
      if (car.holds >= 0 && paths_[car.path].node == car.holds) car.crossed = true;
      car.path = car.next;
      ChooseNext(car);
    }
    car.s = std::min(car.s, paths_[car.path].length);
    car.passing = false;
    for (const auto& [begin, end] : paths_[car.path].narrows) {
      if (car.s + 2.3 > begin && car.s - 2.3 < end) car.passing = true;
    }
    // A junction is let go once the whole car has left it.
    if (car.crossed && paths_[car.path].node < 0 && car.s > 2.3 + 1.0) {
      node_holder_[car.holds] = -1;
      car.holds = -1;
      car.crossed = false;
    }
    Locate(car);
  }
}

std::string Traffic::DebugString(int i) const {
  const Car& car = cars_[i];
  return absl::StrCat("car ", i + 1, " path ", car.path, " (node ", paths_[car.path].node, ") s ",
                      car.s, "/", paths_[car.path].length, " v ", car.speed, " next ", car.next,
                      " holds ", car.holds, car.passing ? " passing" : "", " at (", car.x, ", ",
                      car.y, ")");
}

void Traffic::WriteBoxes(Obstacle* out) const {
  for (int i = 0; i < size(); ++i) {
    Obstacle& box = out[i];
    const Car& car = cars_[i];
    box.id = kTrafficCarIdBase + i + 1;
    if (box.name.empty()) box.name = absl::StrCat(kTrafficCarNamePrefix, i + 1);
    box.half_width = options_.half_width_m;
    box.center = {car.x, car.y};
    box.yaw = car.yaw;
    std::copy(car.bgr, car.bgr + 3, box.bgr);
  }
}

}  // namespace convoy::sim
