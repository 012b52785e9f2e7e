#include "simulator_bridge/world/embedded_sim.h"

#include <cmath>
#include <cstdlib>
#include <set>
#include <thread>

#include "simulator_bridge/world/png.h"
#include "tests/catch.h"
#include "tests/simulator_bridge/world/test_world.h"

namespace convoy::sim {
namespace {

std::unique_ptr<EmbeddedSim> MakeSim(int parked_cars = 0, uint64_t seed = 7) {
  EmbeddedSimOptions options;
  options.world = TestWorld();
  options.num_parked_cars = parked_cars;
  options.seed = seed;
  absl::StatusOr<std::unique_ptr<EmbeddedSim>> sim = EmbeddedSim::Create(options);
  REQUIRE(sim.ok());
  return *std::move(sim);
}

// A point in the middle of the road x = -127.9 (runs north-south, y from -205.6 to -86.6).
constexpr double kRoadX = -127.91722656;

TEST_CASE("the world has road, markings, curb, sidewalk and grass where the geometry says",
          "[world]") {
  const World& world = *TestWorld();
  const double w = world.options().road_half_width_m;
  CHECK(world.MaterialAt({kRoadX + 1.0, -150.0}) == Material::kAsphalt);
  CHECK(world.MaterialAt({kRoadX + w - 0.35, -150.0}) == Material::kWhiteLine);
  CHECK(world.MaterialAt({kRoadX + w + 0.1, -150.0}) == Material::kCurb);
  CHECK(world.MaterialAt({kRoadX + w + 1.0, -150.0}) == Material::kSidewalk);
  CHECK(world.MaterialAt({kRoadX + w + 10.0, -150.0}) == Material::kGrass);
  // The dashed yellow centre line: some points along it are painted, some are gaps.
  std::set<Material> along;
  for (double y = -180.0; y < -160.0; y += 0.5) along.insert(world.MaterialAt({kRoadX, y}));
  CHECK(along.count(Material::kYellowLine) == 1);
  CHECK(along.count(Material::kAsphalt) == 1);
  // No markings inside a junction.
  CHECK(world.MaterialAt({kRoadX, -82.60329102}) == Material::kAsphalt);
  CHECK(world.IsDrivable({kRoadX, -82.60329102}));
  CHECK_FALSE(world.IsDrivable({kRoadX + w + 0.01, -150.0}));
}

TEST_CASE("the texture agrees with the geometry at texel centres", "[world]") {
  const World& world = *TestWorld();
  const double t = world.options().texel_m;
  int checked = 0;
  for (int ty = 0; ty < world.texture_height(); ty += 97) {
    for (int tx = 0; tx < world.texture_width(); tx += 89) {
      const Vec2 p{world.texture_x0() + (tx + 0.5) * t, world.texture_y0() + (ty + 0.5) * t};
      REQUIRE(world.TexelId(tx, ty) / kMaterialVariants == static_cast<int>(world.MaterialAt(p)));
      ++checked;
    }
  }
  CHECK(checked > 500);
}

TEST_CASE("parked cars are placed by seed, on the road edge, apart", "[world]") {
  const World& world = *TestWorld();
  const std::vector<Obstacle> a = world.PlaceParkedCars(30, 3);
  const std::vector<Obstacle> b = world.PlaceParkedCars(30, 3);
  const std::vector<Obstacle> c = world.PlaceParkedCars(30, 4);
  REQUIRE(a.size() == 30);
  REQUIRE(b.size() == 30);
  bool differs = false;
  for (size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i].center.x == b[i].center.x);
    CHECK(a[i].center.y == b[i].center.y);
    CHECK(world.IsDrivable(a[i].center));
    CHECK(world.map().DistanceToCenterLine(a[i].center) > 1.5);
    if (i < c.size() && c[i].center.x != a[i].center.x) differs = true;
  }
  CHECK(differs);
}

TEST_CASE("the default start is on the road nearest the origin", "[embedded_sim]") {
  std::unique_ptr<EmbeddedSim> sim = MakeSim();
  absl::StatusOr<Pose> pose = sim->GetPose();
  REQUIRE(pose.ok());
  CHECK(std::abs(pose->position.x_val) < 1.0);
  CHECK(std::abs(pose->position.y_val) < 1.0);
  CHECK(sim->world().IsDrivable({pose->position.x_val, pose->position.y_val}));
}

TEST_CASE("driving straight off the road collides with the curb and stops", "[embedded_sim]") {
  std::unique_ptr<EmbeddedSim> sim = MakeSim();
  // On the road x = -127.9, facing east (+y is along the road; yaw 0 is north, across it).
  REQUIRE(sim->SetPose(PoseAt(kRoadX, -150.0, 0.0), false).ok());
  CarControls c;
  c.throttle = 1.0f;
  REQUIRE(sim->SetControls(c).ok());
  CollisionInfo info;
  for (int i = 0; i < 200 && !info.has_collided; ++i) {
    REQUIRE(sim->ContinueForTime(absl::Milliseconds(50)).ok());
    absl::StatusOr<CollisionInfo> got = sim->GetCollisionInfo();
    REQUIRE(got.ok());
    info = *got;
  }
  REQUIRE(info.has_collided);
  CHECK(info.object_name == "Curb");
  CHECK(info.normal.x_val == Approx(-1.0).margin(1e-3));  // back towards the road (south)
  CHECK(info.impact_point.x_val == Approx(kRoadX + 4.5).margin(0.05));
  CHECK(info.time_stamp > 0);
  absl::StatusOr<CarState> state = sim->GetState();
  REQUIRE(state.ok());
  CHECK(state->speed == 0.0f);
  // The front of the car is at the curb: centre within half a length (plus a step) of it.
  CHECK(state->kinematics_estimated.position.x_val > kRoadX + 4.5 - 2.3 - 0.5);
  // Read once: the next read is clear.
  absl::StatusOr<CollisionInfo> again = sim->GetCollisionInfo();
  REQUIRE(again.ok());
  CHECK_FALSE(again->has_collided);
}

TEST_CASE("driving into a parked car reports that car", "[embedded_sim]") {
  std::unique_ptr<EmbeddedSim> sim = MakeSim(20, 11);
  const Obstacle& target = sim->obstacles().front();
  // Start 12 m behind it along its heading, aimed at it.
  const double back = 12.0;
  REQUIRE(sim->SetPose(PoseAt(target.center.x - back * std::cos(target.yaw),
                              target.center.y - back * std::sin(target.yaw), target.yaw),
                       false)
              .ok());
  CarControls c;
  c.throttle = 0.6f;
  REQUIRE(sim->SetControls(c).ok());
  CollisionInfo info;
  for (int i = 0; i < 200 && !info.has_collided; ++i) {
    sim->Step(1);
    info = *sim->GetCollisionInfo();
  }
  REQUIRE(info.has_collided);
  CHECK(info.object_name == target.name);
  CHECK(info.object_id == target.id);
}

TEST_CASE("a run is bit-for-bit reproducible", "[embedded_sim]") {
  auto run = [] {
    std::unique_ptr<EmbeddedSim> sim = MakeSim(10, 5);
    std::vector<uint8_t> frame(256 * 144 * 3);
    std::vector<uint8_t> all;
    for (int i = 0; i < 60; ++i) {
      CarControls c;
      c.throttle = 0.7f;
      c.steering = static_cast<float>(std::sin(i * 0.3) * 0.4);
      REQUIRE(sim->SetControls(c).ok());
      REQUIRE(sim->ContinueForTime(absl::Milliseconds(100)).ok());
      sim->RenderScene(frame.data());
      all.insert(all.end(), frame.begin(), frame.end());
    }
    const CarKinematics& k = sim->kinematics();
    return std::make_pair(all, std::vector<double>{k.x, k.y, k.yaw, k.speed});
  };
  const auto a = run();
  const auto b = run();
  CHECK(a.second == b.second);
  CHECK(a.first == b.first);
}

TEST_CASE("time advances only when asked, in whole physics steps", "[embedded_sim]") {
  std::unique_ptr<EmbeddedSim> sim = MakeSim();
  CHECK(sim->GetState()->timestamp == 0);
  REQUIRE(sim->ContinueForTime(absl::Milliseconds(100)).ok());
  CHECK(sim->GetState()->timestamp == 100000000u);
  REQUIRE(sim->ContinueForTime(absl::Milliseconds(10)).ok());  // at least one step
  CHECK(sim->GetState()->timestamp == 150000000u);
  REQUIRE(sim->ContinueForTime(absl::ZeroDuration()).ok());
  CHECK(sim->GetState()->timestamp == 150000000u);
  CHECK_FALSE(sim->ContinueForTime(absl::InfiniteDuration()).ok());
}

TEST_CASE("the scene image looks like a road seen from a car", "[embedded_sim][render]") {
  std::unique_ptr<EmbeddedSim> sim = MakeSim();
  REQUIRE(sim->SetPose(PoseAt(kRoadX, -180.0, M_PI / 2), true).ok());  // along the road
  std::vector<ImageResponse> responses;
  REQUIRE(sim->GetImages({ImageRequest{}}, &responses).ok());
  REQUIRE(responses.size() == 1);
  const ImageResponse& r = responses[0];
  REQUIRE(r.width == 256);
  REQUIRE(r.height == 144);
  REQUIRE(r.image_data_uint8.size() == 256u * 144u * 3u);
  auto pixel = [&](int x, int y) { return &r.image_data_uint8[(y * 256 + x) * 3]; };
  // Sky on top: blue channel dominant.
  CHECK(pixel(128, 5)[0] > pixel(128, 5)[2]);
  // Straight ahead on the road near the bottom: grey asphalt; the centre line is at the centre.
  const uint8_t* road = pixel(100, 130);
  CHECK(std::abs(road[0] - road[2]) < 20);
  CHECK(road[1] < 110);
  // Far to the side at the bottom of the image: curb/sidewalk/grass, not asphalt everywhere.
  int greenish = 0;
  for (int x = 0; x < 256; ++x) {
    for (int y = 76; y < 135; ++y) {
      const uint8_t* p = pixel(x, y);
      if (p[1] > p[0] + 30 && p[1] > p[2] + 20) ++greenish;
    }
  }
  CHECK(greenish > 200);
  if (const char* dir = std::getenv("CONVOY_TEST_FRAME_DIR")) {
    REQUIRE(WritePng(std::string(dir) + "/road.png", r.image_data_uint8.data(), 256, 144,
                     PixelOrder::kBgr)
                .ok());
  }
}

TEST_CASE("the centre line moves across the image as the car moves across the road",
          "[embedded_sim][render]") {
  // What an agent must learn from: the painted centre line's column in the cookbook crop tells the
  // car's lateral offset. Heading east along x = kRoadX, +x (north) is to the car's left.
  std::unique_ptr<EmbeddedSim> sim = MakeSim();
  std::vector<uint8_t> bgr(256 * 144 * 3);
  auto centre_line_column = [&](double offset_left) {
    double sum = 0.0;
    int count = 0;
    // Average over several positions along the road so the dashes' gaps do not matter.
    for (double y = -180.0; y < -171.0; y += 1.0) {
      REQUIRE(sim->SetPose(PoseAt(kRoadX + offset_left, y, M_PI / 2), true).ok());
      sim->RenderScene(bgr.data());
      for (int row = 100; row <= 134; ++row) {
        for (int x = 0; x < 256; ++x) {
          const uint8_t* p = &bgr[(row * 256 + x) * 3];
          if (p[2] > 150 && p[1] > 120 && p[0] < 100) {  // yellow: R and G high, B low
            sum += x;
            ++count;
          }
        }
      }
    }
    REQUIRE(count > 0);
    return sum / count;
  };
  const double left = centre_line_column(1.0);  // car 1 m left of the line: line to the right
  const double centre = centre_line_column(0.0);
  const double right = centre_line_column(-1.0);  // car 1 m right of the line: line to the left
  CHECK(centre == Approx(128.0).margin(3.0));
  CHECK(left > centre + 10.0);
  CHECK(right < centre - 10.0);
}

TEST_CASE("depth is planar distance to the ground and PNG round-trips the scene",
          "[embedded_sim][render]") {
  std::unique_ptr<EmbeddedSim> sim = MakeSim();
  REQUIRE(sim->SetPose(PoseAt(kRoadX, -180.0, M_PI / 2), true).ok());
  ImageRequest scene, depth, png, unknown_camera, unsupported;
  depth.image_type = ImageType::kDepthPlanar;
  depth.pixels_as_float = true;
  png.compress = true;
  unknown_camera.camera_name = "rear_left";
  unsupported.image_type = ImageType::kSegmentation;
  std::vector<ImageResponse> out;
  REQUIRE(sim->GetImages({scene, depth, png, unknown_camera, unsupported}, &out).ok());
  REQUIRE(out.size() == 5);
  REQUIRE(out[1].image_data_float.size() == 256u * 144u);
  // Row v sees the ground at h * f / (v + 0.5 - cy) = 1.3 * 128 / (v + 0.5 - 72).
  CHECK(out[1].image_data_float[130 * 256 + 10] == Approx(1.3 * 128 / 58.5).epsilon(1e-5));
  CHECK(out[1].image_data_float[10 * 256 + 10] == Approx(1000.0));
  int w, h, channels;
  absl::StatusOr<std::vector<uint8_t>> decoded =
      DecodePng(out[2].image_data_uint8, &w, &h, &channels);
  REQUIRE(decoded.ok());
  REQUIRE(w == 256);
  REQUIRE(channels == 3);
  bool same = true;
  for (size_t p = 0; p < 256u * 144u; ++p) {
    for (int c = 0; c < 3; ++c)
      same &= (*decoded)[p * 3 + c] == out[0].image_data_uint8[p * 3 + 2 - c];
  }
  CHECK(same);
  CHECK(out[3].width == 0);
  CHECK(out[3].message.find("rear_left") != std::string::npos);
  CHECK(out[4].width == 0);
  CHECK_FALSE(out[4].message.empty());
}

TEST_CASE("a parked car in view is drawn and nearer than the ground behind it",
          "[embedded_sim][render]") {
  std::unique_ptr<EmbeddedSim> sim = MakeSim(20, 11);
  const Obstacle& target = sim->obstacles().front();
  REQUIRE(sim->SetPose(PoseAt(target.center.x - 15.0 * std::cos(target.yaw),
                              target.center.y - 15.0 * std::sin(target.yaw), target.yaw),
                       true)
              .ok());
  std::vector<float> depth(256 * 144);
  sim->RenderDepth(depth.data(), false);
  // The camera (1.6 m ahead of our centre, 1.3 m up) is 12.1 m from the rear of the parked car's
  // cabin, whose 1.5 m roof line rises just above the horizon row (72), where otherwise is sky.
  int near_above_horizon = 0;
  for (int y = 60; y < 72; ++y) {
    for (int x = 0; x < 256; ++x) {
      const float d = depth[y * 256 + x];
      if (d > 10.5f && d < 13.0f) ++near_above_horizon;
    }
  }
  CHECK(near_above_horizon > 0);
  if (const char* dir = std::getenv("CONVOY_TEST_FRAME_DIR")) {
    std::vector<uint8_t> bgr(256 * 144 * 3);
    sim->RenderScene(bgr.data());
    REQUIRE(
        WritePng(std::string(dir) + "/parked.png", bgr.data(), 256, 144, PixelOrder::kBgr).ok());
  }
}

}  // namespace
}  // namespace convoy::sim

namespace convoy::sim {
namespace {

TEST_CASE("simulators on separate threads sharing one world run independently", "[embedded_sim]") {
  auto drive = [](uint64_t seed, uint64_t* checksum) {
    EmbeddedSimOptions options;
    options.world = TestWorld();
    options.num_parked_cars = 10;
    options.seed = seed;
    std::unique_ptr<EmbeddedSim> sim = *EmbeddedSim::Create(options);
    std::vector<uint8_t> frame(256 * 144 * 3);
    uint64_t sum = 0;
    for (int i = 0; i < 40; ++i) {
      CarControls c;
      c.throttle = 0.5f;
      c.steering = static_cast<float>((i % 7) - 3) * 0.1f;
      sim->SetControls(c).IgnoreError();
      sim->Step(2);
      sim->RenderScene(frame.data());
      for (uint8_t b : frame) sum = sum * 1099511628211ULL + b;
    }
    *checksum = sum;
  };
  uint64_t alone[4];
  for (int t = 0; t < 4; ++t) drive(t, &alone[t]);
  uint64_t together[4];
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) threads.emplace_back(drive, t, &together[t]);
  for (std::thread& thread : threads) thread.join();
  for (int t = 0; t < 4; ++t) CHECK(together[t] == alone[t]);
}

}  // namespace
}  // namespace convoy::sim
