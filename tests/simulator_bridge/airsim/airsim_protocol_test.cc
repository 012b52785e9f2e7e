// convoy_sim conformance: the AirSim protocol as AIRSIM_PROTOCOL.md states it, checked through
// AirSimClient and through raw msgpack bytes on a TCP socket to a real AirSimServer on 127.0.0.1.
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <optional>
#include <random>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "simulator_bridge/airsim/airsim_client.h"
#include "simulator_bridge/airsim/airsim_codec.h"
#include "simulator_bridge/airsim/airsim_server.h"
#include "simulator_bridge/airsim/socket.h"
#include "simulator_bridge/task/driving_env.h"
#include "simulator_bridge/world/png.h"
#include "tests/catch.h"
#include "tests/simulator_bridge/world/test_world.h"

namespace convoy::sim {
namespace {

using airsim::Packer;
using airsim::Write;

AirSimServerOptions ServerOptions(SimClockMode clock = SimClockMode::kLockStep) {
  AirSimServerOptions options;
  options.sim.world = TestWorld();
  options.port = 0;
  options.clock = clock;
  options.max_message_bytes = 1 << 20;
  options.partial_message_timeout = absl::Milliseconds(500);
  return options;
}

std::unique_ptr<AirSimServer> StartServer(const AirSimServerOptions& options = ServerOptions()) {
  absl::StatusOr<std::unique_ptr<AirSimServer>> server = AirSimServer::Start(options);
  REQUIRE(server.ok());
  REQUIRE((*server)->port() > 0);
  return *std::move(server);
}

std::unique_ptr<AirSimClient> ConnectClient(int port) {
  AirSimClientOptions options;
  options.port = port;
  options.call_timeout = absl::Seconds(10);
  options.max_reconnect_attempts = 2;
  options.backoff.initial = absl::Milliseconds(10);
  options.backoff.max = absl::Milliseconds(50);
  absl::StatusOr<std::unique_ptr<AirSimClient>> client = AirSimClient::Connect(options);
  REQUIRE(client.ok());
  return *std::move(client);
}

// A plain TCP connection that speaks msgpack by hand.
class RawConnection {
 public:
  explicit RawConnection(int port) : unpacker_(nullptr, nullptr, 1 << 16) {
    absl::StatusOr<ScopedFd> fd = ConnectTcp("127.0.0.1", port, absl::Seconds(5));
    REQUIRE(fd.ok());
    fd_ = *std::move(fd);
  }
  bool Send(const std::string& bytes) {
    return SendAll(fd_.get(), bytes.data(), bytes.size(), absl::Now() + absl::Seconds(5)).ok();
  }
  // The next message, or nullopt after `timeout` or when the server closed (closed() says which).
  std::optional<msgpack::object_handle> Read(absl::Duration timeout = absl::Seconds(10)) {
    const absl::Time deadline = absl::Now() + timeout;
    msgpack::object_handle h;
    while (true) {
      if (unpacker_.next(h)) return h;
      if (!WaitReadable(fd_.get(), deadline).ok()) return std::nullopt;
      unpacker_.reserve_buffer(1 << 16);
      const ssize_t n = ::recv(fd_.get(), unpacker_.buffer(), unpacker_.buffer_capacity(), 0);
      if (n <= 0) {
        closed_ = true;
        return std::nullopt;
      }
      unpacker_.buffer_consumed(static_cast<size_t>(n));
    }
  }
  // True once the server has closed the connection (reads until EOF or the timeout).
  bool ClosedByServer(absl::Duration timeout = absl::Seconds(10)) {
    while (!closed_ && Read(timeout).has_value()) {
    }
    return closed_;
  }

 private:
  ScopedFd fd_;
  msgpack::unpacker unpacker_;
  bool closed_ = false;
};

std::string Bytes(std::initializer_list<int> bytes) {
  std::string s;
  for (int b : bytes) s.push_back(static_cast<char>(b));
  return s;
}

// [0, msgid, method, [args...]] with args written by `args`.
std::string Request(uint32_t msgid, const std::string& method, uint32_t argc,
                    const std::function<void(Packer&)>& args = nullptr) {
  msgpack::sbuffer buffer;
  Packer pk(buffer);
  pk.pack_array(4);
  pk.pack_int(0);
  pk.pack_uint32(msgid);
  Write(pk, method);
  pk.pack_array(argc);
  if (args) args(pk);
  return std::string(buffer.data(), buffer.size());
}

struct Reply {
  uint32_t msgid = 0;
  std::optional<std::string> error;
  msgpack::object_handle handle;
  const msgpack::object& result() const { return handle.get().via.array.ptr[3]; }
};

Reply Call(RawConnection& c, uint32_t msgid, const std::string& method, uint32_t argc,
           const std::function<void(Packer&)>& args = nullptr) {
  REQUIRE(c.Send(Request(msgid, method, argc, args)));
  std::optional<msgpack::object_handle> h = c.Read();
  REQUIRE(h.has_value());
  const msgpack::object& m = h->get();
  REQUIRE(m.type == msgpack::type::ARRAY);
  REQUIRE(m.via.array.size == 4);
  REQUIRE(m.via.array.ptr[0].as<int>() == 1);
  Reply r;
  r.msgid = m.via.array.ptr[1].as<uint32_t>();
  if (m.via.array.ptr[2].type != msgpack::type::NIL) {
    REQUIRE(m.via.array.ptr[2].type == msgpack::type::STR);
    r.error = m.via.array.ptr[2].as<std::string>();
    CHECK(m.via.array.ptr[3].type == msgpack::type::NIL);
  }
  r.handle = std::move(*h);
  return r;
}

std::vector<std::string> MapKeys(const msgpack::object& o) {
  REQUIRE(o.type == msgpack::type::MAP);
  std::vector<std::string> keys;
  for (uint32_t i = 0; i < o.via.map.size; ++i)
    keys.push_back(o.via.map.ptr[i].key.as<std::string>());
  return keys;
}

const msgpack::object& Field(const msgpack::object& o, const std::string& key) {
  for (uint32_t i = 0; i < o.via.map.size; ++i) {
    if (o.via.map.ptr[i].key.as<std::string>() == key) return o.via.map.ptr[i].val;
  }
  FAIL("no key " << key);
  static msgpack::object nil;
  return nil;
}

const std::vector<std::string> kVector3 = {"x_val", "y_val", "z_val"};
const std::vector<std::string> kKinematics = {
    "position",         "orientation",         "linear_velocity",
    "angular_velocity", "linear_acceleration", "angular_acceleration"};

TEST_CASE("every method answers with AirSim's result shape over raw msgpack", "[airsim_protocol]") {
  std::unique_ptr<AirSimServer> server = StartServer();
  RawConnection c(server->port());
  uint32_t id = 0;
  auto vehicle = [](Packer& pk) { Write(pk, ""); };

  Reply r = Call(c, id++, "ping", 0);
  CHECK(r.result().type == msgpack::type::BOOLEAN);
  CHECK(r.result().via.boolean);
  r = Call(c, id++, "getServerVersion", 0);
  CHECK(r.result().type == msgpack::type::POSITIVE_INTEGER);
  CHECK(r.result().via.u64 == 1);
  r = Call(c, id++, "getMinRequiredClientVersion", 0);
  CHECK(r.result().via.u64 == 1);
  CHECK(Call(c, id++, "reset", 0).result().type == msgpack::type::NIL);
  r = Call(c, id++, "enableApiControl", 2, [](Packer& pk) {
    Write(pk, true);
    Write(pk, "");
  });
  CHECK(r.result().type == msgpack::type::NIL);
  r = Call(c, id++, "isApiControlEnabled", 1, vehicle);
  CHECK(r.result().type == msgpack::type::BOOLEAN);
  CHECK(r.result().via.boolean);
  r = Call(c, id++, "armDisarm", 2, [](Packer& pk) {
    Write(pk, true);
    Write(pk, "");
  });
  CHECK(r.result().via.boolean);
  CHECK(Call(c, id++, "simPause", 1, [](Packer& pk) { Write(pk, true); }).result().type ==
        msgpack::type::NIL);
  r = Call(c, id++, "simIsPaused", 0);
  CHECK(r.result().type == msgpack::type::BOOLEAN);
  CHECK(Call(c, id++, "simContinueForTime", 1, [](Packer& pk) { Write(pk, 0.5); }).result().type ==
        msgpack::type::NIL);
  CHECK(Call(c, id++, "simContinueForFrames", 1, [](Packer& pk) { Write(pk, uint32_t{3}); })
            .result()
            .type == msgpack::type::NIL);

  r = Call(c, id++, "getCarState", 1, vehicle);
  CHECK(MapKeys(r.result()) == std::vector<std::string>{"speed", "gear", "rpm", "maxrpm",
                                                        "handbrake", "kinematics_estimated",
                                                        "timestamp"});
  CHECK(Field(r.result(), "speed").type == msgpack::type::FLOAT32);
  CHECK(Field(r.result(), "timestamp").type == msgpack::type::POSITIVE_INTEGER);
  CHECK(Field(r.result(), "timestamp").via.u64 == 650000000u);  // 0.5 s + 3 frames of 0.05 s
  CHECK(MapKeys(Field(r.result(), "kinematics_estimated")) == kKinematics);
  CHECK(MapKeys(Field(Field(r.result(), "kinematics_estimated"), "orientation")) ==
        std::vector<std::string>{"w_val", "x_val", "y_val", "z_val"});

  r = Call(c, id++, "setCarControls", 2, [](Packer& pk) {
    CarControls controls;
    controls.throttle = 0.75f;
    Write(pk, controls);
    Write(pk, "");
  });
  CHECK(r.result().type == msgpack::type::NIL);
  r = Call(c, id++, "getCarControls", 1, vehicle);
  CHECK(MapKeys(r.result()) == std::vector<std::string>{"throttle", "steering", "brake",
                                                        "handbrake", "is_manual_gear",
                                                        "manual_gear", "gear_immediate"});
  CHECK(Field(r.result(), "throttle").as<float>() == 0.75f);

  r = Call(c, id++, "simGetImages", 3, [](Packer& pk) {
    ImageRequest scene, depth;
    depth.image_type = ImageType::kDepthPlanar;
    depth.pixels_as_float = true;
    Write(pk, std::vector<ImageRequest>{scene, depth});
    Write(pk, "");
    Write(pk, false);
  });
  REQUIRE(r.result().type == msgpack::type::ARRAY);
  REQUIRE(r.result().via.array.size == 2);
  const msgpack::object& scene = r.result().via.array.ptr[0];
  CHECK(MapKeys(scene) ==
        std::vector<std::string>{"image_data_uint8", "image_data_float", "camera_position",
                                 "camera_name", "camera_orientation", "time_stamp", "message",
                                 "pixels_as_float", "compress", "width", "height", "image_type"});
  CHECK(Field(scene, "image_data_uint8").type == msgpack::type::BIN);
  CHECK(Field(scene, "image_data_uint8").via.bin.size == 256u * 144u * 3u);
  CHECK(Field(scene, "width").as<int>() == 256);
  CHECK(Field(scene, "height").as<int>() == 144);
  const msgpack::object& depth = r.result().via.array.ptr[1];
  CHECK(Field(depth, "image_data_float").type == msgpack::type::ARRAY);
  CHECK(Field(depth, "image_data_float").via.array.size == 256u * 144u);
  CHECK(Field(depth, "image_data_float").via.array.ptr[0].type == msgpack::type::FLOAT32);

  r = Call(c, id++, "simGetImage", 4, [](Packer& pk) {
    Write(pk, "0");
    Write(pk, int32_t{0});
    Write(pk, "");
    Write(pk, false);
  });
  REQUIRE(r.result().type == msgpack::type::BIN);
  std::vector<uint8_t> png(r.result().via.bin.ptr,
                           r.result().via.bin.ptr + r.result().via.bin.size);
  int w, h, channels;
  CHECK(DecodePng(png, &w, &h, &channels).ok());
  CHECK(w == 256);

  r = Call(c, id++, "simGetCollisionInfo", 1, vehicle);
  CHECK(MapKeys(r.result()) == std::vector<std::string>{"has_collided", "penetration_depth",
                                                        "time_stamp", "normal", "impact_point",
                                                        "position", "object_name", "object_id"});
  CHECK(Field(r.result(), "has_collided").type == msgpack::type::BOOLEAN);
  r = Call(c, id++, "simGetVehiclePose", 1, vehicle);
  CHECK(MapKeys(r.result()) == std::vector<std::string>{"position", "orientation"});
  CHECK(MapKeys(Field(r.result(), "position")) == kVector3);
  r = Call(c, id++, "simSetVehiclePose", 3, [](Packer& pk) {
    Pose pose;
    pose.position = {-127.9f, -150.0f, 0.0f};
    Write(pk, pose);
    Write(pk, true);
    Write(pk, "");
  });
  CHECK(r.result().type == msgpack::type::NIL);
  r = Call(c, id++, "simGetGroundTruthKinematics", 1, vehicle);
  CHECK(MapKeys(r.result()) == kKinematics);
  CHECK(Field(Field(r.result(), "position"), "y_val").as<float>() == -150.0f);
  r = Call(c, id++, "listVehicles", 0);
  REQUIRE(r.result().type == msgpack::type::ARRAY);
  CHECK(r.result().via.array.ptr[0].as<std::string>() == "PhysXCar");
  CHECK(r.msgid == id - 1);
}

TEST_CASE(
    "the scene's parked, stalled and moving cars are listed and posed as AirSim's scene objects",
    "[airsim_protocol][traffic]") {
  AirSimServerOptions options = ServerOptions();
  options.sim.num_parked_cars = 5;
  options.sim.num_stalled_cars = 2;
  options.sim.traffic.cars = 4;
  options.sim.seed = 2;
  options.clock = SimClockMode::kLockStep;
  std::unique_ptr<AirSimServer> server = StartServer(options);
  RawConnection c(server->port());
  uint32_t id = 0;
  auto pattern = [](const char* re) { return [re](Packer& pk) { Write(pk, re); }; };
  // What AirSim's Python client sends: simListSceneObjects(name_regex) and simGetObjectPose(name).
  Reply r = Call(c, id++, "simListSceneObjects", 1, pattern("TrafficCar_.*"));
  REQUIRE(!r.error.has_value());
  REQUIRE(r.result().type == msgpack::type::ARRAY);
  std::vector<std::string> traffic;
  for (uint32_t i = 0; i < r.result().via.array.size; ++i) {
    traffic.push_back(r.result().via.array.ptr[i].as<std::string>());
  }
  CHECK(traffic ==
        std::vector<std::string>{"TrafficCar_1", "TrafficCar_2", "TrafficCar_3", "TrafficCar_4"});
  r = Call(c, id++, "simListSceneObjects", 1, pattern("StalledCar_.*"));
  CHECK(r.result().via.array.size == 2);
  r = Call(c, id++, "simListSceneObjects", 1, pattern(".*"));
  CHECK(r.result().via.array.size == 5 + 2 + 4 + 1);  // parked, stalled, traffic, the vehicle
  r = Call(c, id++, "simGetObjectPose", 1, pattern("TrafficCar_2"));
  REQUIRE(!r.error.has_value());
  CHECK(MapKeys(r.result()) == std::vector<std::string>{"position", "orientation"});
  const float x0 = Field(Field(r.result(), "position"), "x_val").as<float>();
  const float y0 = Field(Field(r.result(), "position"), "y_val").as<float>();
  CHECK(std::isfinite(x0));
  // The traffic moves as the simulation does.
  r = Call(c, id++, "simContinueForTime", 1, [](Packer& pk) { Write(pk, 2.0); });
  REQUIRE(!r.error.has_value());
  r = Call(c, id++, "simGetObjectPose", 1, pattern("TrafficCar_2"));
  const float x1 = Field(Field(r.result(), "position"), "x_val").as<float>();
  const float y1 = Field(Field(r.result(), "position"), "y_val").as<float>();
  CHECK(std::hypot(x1 - x0, y1 - y0) > 3.0);
  // As AirSim: a name not in the scene has a pose of NaNs; a bad expression is an error.
  r = Call(c, id++, "simGetObjectPose", 1, pattern("NoSuchThing"));
  CHECK(std::isnan(Field(Field(r.result(), "position"), "x_val").as<float>()));
  r = Call(c, id++, "simListSceneObjects", 1, pattern("(["));
  REQUIRE(r.error.has_value());
  CHECK(r.error->find("bad regular expression") != std::string::npos);
}

TEST_CASE("unknown methods and wrong argument counts get rpclib's error strings",
          "[airsim_protocol]") {
  std::unique_ptr<AirSimServer> server = StartServer();
  RawConnection c(server->port());
  Reply r = Call(c, 1, "simFlyToTheMoon", 2, [](Packer& pk) {
    Write(pk, 1.0);
    Write(pk, "");
  });
  CHECK(r.error ==
        std::optional<std::string>(
            "rpclib: server could not find function 'simFlyToTheMoon' with argument count 2."));
  r = Call(c, 2, "getCarState", 0);
  CHECK(r.error == std::optional<std::string>(
                       "rpclib: client error C0002: Function 'getCarState' was called with an "
                       "invalid number of arguments. Expected: 1, got: 0"));
  r = Call(c, 3, "simGetImages", 2, [](Packer& pk) {
    pk.pack_array(0);
    Write(pk, "");
  });
  CHECK(r.error == std::optional<std::string>(
                       "rpclib: client error C0002: Function 'simGetImages' was called with an "
                       "invalid number of arguments. Expected: 3, got: 2"));
  // The connection stays usable after errors.
  CHECK(Call(c, 4, "ping", 0).result().via.boolean);
}

TEST_CASE("every method checks its exact argument count and argument types", "[airsim_protocol]") {
  const std::vector<std::pair<std::string, uint32_t>> methods = {
      {"ping", 0},
      {"getServerVersion", 0},
      {"getMinRequiredClientVersion", 0},
      {"reset", 0},
      {"enableApiControl", 2},
      {"isApiControlEnabled", 1},
      {"armDisarm", 2},
      {"simPause", 1},
      {"simIsPaused", 0},
      {"simContinueForTime", 1},
      {"simContinueForFrames", 1},
      {"getCarState", 1},
      {"setCarControls", 2},
      {"getCarControls", 1},
      {"simGetImages", 3},
      {"simGetImage", 4},
      {"simGetCollisionInfo", 1},
      {"simGetVehiclePose", 1},
      {"simSetVehiclePose", 3},
      {"simGetGroundTruthKinematics", 1},
      {"listVehicles", 0},
  };
  std::unique_ptr<AirSimServer> server = StartServer();
  RawConnection c(server->port());
  uint32_t id = 0;
  for (const auto& [method, arity] : methods) {
    INFO(method);
    const auto nils = [n = arity + 1](Packer& pk) {
      for (uint32_t i = 0; i < n; ++i) pk.pack_nil();
    };
    Reply r = Call(c, id++, method, arity + 1, nils);
    CHECK(r.error == std::optional<std::string>(absl::StrCat(
                         "rpclib: client error C0002: Function '", method,
                         "' was called with an invalid number of arguments. Expected: ", arity,
                         ", got: ", arity + 1)));
    if (arity == 0) continue;
    // The right count, all nil: no parameter accepts nil.
    r = Call(c, id++, method, arity, [arity = arity](Packer& pk) {
      for (uint32_t i = 0; i < arity; ++i) pk.pack_nil();
    });
    CHECK(r.error ==
          std::optional<std::string>(airsim::HandlerError(method, arity, "std::bad_cast")));
  }
}

TEST_CASE("numbers are lenient for floats, strict for ints and bools", "[airsim_protocol]") {
  std::unique_ptr<AirSimServer> server = StartServer();
  RawConnection c(server->port());
  // Python sends steering=0 and throttle=1 as ints.
  Reply r = Call(c, 1, "setCarControls", 2, [](Packer& pk) {
    pk.pack_map(3);
    Write(pk, "throttle");
    pk.pack_int(1);
    Write(pk, "steering");
    pk.pack_int(0);
    Write(pk, "brake");
    pk.pack_int(0);
    Write(pk, "");
  });
  CHECK_FALSE(r.error.has_value());
  CHECK(Call(c, 2, "simContinueForTime", 1, [](Packer& pk) { pk.pack_int(1); }).error ==
        std::nullopt);
  // A str where a bool belongs, a float where an int belongs: rpclib's conversion error.
  r = Call(c, 3, "enableApiControl", 2, [](Packer& pk) {
    Write(pk, "yes");
    Write(pk, "");
  });
  CHECK(r.error == std::optional<std::string>(
                       "rpclib: function 'enableApiControl' (called with 2 arg(s)) threw an "
                       "exception. The exception contained this information: std::bad_cast."));
  r = Call(c, 4, "simContinueForFrames", 1, [](Packer& pk) { Write(pk, 2.5); });
  CHECK(r.error.has_value());
  CHECK(r.error->find("std::bad_cast") != std::string::npos);
  // A vehicle name as bin is a string.
  r = Call(c, 5, "getCarState", 1, [](Packer& pk) {
    pk.pack_bin(8);
    pk.pack_bin_body("PhysXCar", 8);
  });
  CHECK_FALSE(r.error.has_value());
  r = Call(c, 6, "getCarState", 1, [](Packer& pk) { Write(pk, "NoSuchCar"); });
  REQUIRE(r.error.has_value());
  CHECK(r.error->find("Vehicle API for 'NoSuchCar' is not available") != std::string::npos);
  // A struct read by key name: order free, unknown keys ignored, missing keys default.
  r = Call(c, 7, "simSetVehiclePose", 3, [](Packer& pk) {
    pk.pack_map(2);
    Write(pk, "extra");
    Write(pk, 5);
    Write(pk, "position");
    pk.pack_map(2);
    Write(pk, "y_val");
    pk.pack_int(-150);
    Write(pk, "x_val");
    Write(pk, -127.9);
    Write(pk, true);
    Write(pk, "");
  });
  CHECK_FALSE(r.error.has_value());
  r = Call(c, 8, "simGetVehiclePose", 1, [](Packer& pk) { Write(pk, ""); });
  CHECK(Field(Field(r.result(), "position"), "y_val").as<float>() == -150.0f);
  // Colosseum 2.3+ writes structs as positional arrays: read those too.
  r = Call(c, 9, "simSetVehiclePose", 3, [](Packer& pk) {
    pk.pack_array(2);
    pk.pack_array(3);
    Write(pk, -127.9);
    Write(pk, -160.0);
    Write(pk, 0.0);
    pk.pack_array(4);
    Write(pk, 1.0);
    Write(pk, 0.0);
    Write(pk, 0.0);
    Write(pk, 0.0);
    Write(pk, true);
    Write(pk, "");
  });
  CHECK_FALSE(r.error.has_value());
  r = Call(c, 10, "simGetVehiclePose", 1, [](Packer& pk) { Write(pk, ""); });
  CHECK(Field(Field(r.result(), "position"), "y_val").as<float>() == -160.0f);
}

TEST_CASE("pipelined requests are answered in order and notifications are not",
          "[airsim_protocol]") {
  std::unique_ptr<AirSimServer> server = StartServer();
  RawConnection c(server->port());
  msgpack::sbuffer notify;
  Packer pk(notify);
  pk.pack_array(3);
  pk.pack_int(2);
  Write(pk, "simPause");
  pk.pack_array(1);
  Write(pk, true);
  const std::string batch = Request(10, "ping", 0) + std::string(notify.data(), notify.size()) +
                            Request(11, "simIsPaused", 0) + Request(12, "listVehicles", 0);
  REQUIRE(c.Send(batch));
  for (uint32_t id : {10u, 11u, 12u}) {
    std::optional<msgpack::object_handle> h = c.Read();
    REQUIRE(h.has_value());
    CHECK(h->get().via.array.ptr[1].as<uint32_t>() == id);
    if (id == 11) CHECK(h->get().via.array.ptr[3].as<bool>());
  }
}

TEST_CASE("AirSimClient drives every method", "[airsim_protocol]") {
  std::unique_ptr<AirSimServer> server = StartServer();
  std::unique_ptr<AirSimClient> client = ConnectClient(server->port());
  CHECK(*client->Ping());
  CHECK(*client->IsApiControlEnabled());  // Connect enables it
  CHECK(*client->ArmDisarm(true));
  REQUIRE(client->Reset().ok());
  REQUIRE(client->Pause(true).ok());
  CHECK(*client->IsPaused());
  Pose pose;
  pose.position = {-127.91722656f, -150.0f, 0.0f};
  pose.orientation = QuaternionFromYaw(M_PI / 2);
  REQUIRE(client->SetPose(pose, true).ok());
  CarControls controls;
  controls.throttle = 1.0f;
  REQUIRE(client->SetControls(controls).ok());
  CHECK(client->GetControls()->throttle == 1.0f);
  REQUIRE(client->ContinueForTime(absl::Seconds(1)).ok());
  REQUIRE(client->ContinueForFrames(2).ok());
  absl::StatusOr<CarState> state = client->GetState();
  REQUIRE(state.ok());
  CHECK(state->speed > 2.0f);
  CHECK(state->timestamp == 1100000000u);
  CHECK(state->kinematics_estimated.position.y_val > -150.0f);
  CHECK(client->GetPose()->position.y_val == state->kinematics_estimated.position.y_val);
  CHECK(client->GetGroundTruthKinematics()->linear_velocity.y_val > 2.0f);
  CHECK_FALSE(client->GetCollisionInfo()->has_collided);
  std::vector<ImageResponse> images;
  REQUIRE(client->GetImages({ImageRequest{}}, &images).ok());
  REQUIRE(images.size() == 1);
  CHECK(images[0].width == 256);
  CHECK(images[0].image_data_uint8.size() == 256u * 144u * 3u);
  absl::StatusOr<std::vector<uint8_t>> png = client->GetImagePng("0", ImageType::kScene);
  REQUIRE(png.ok());
  CHECK(png->size() > 100);
  CHECK(client->GetImagePng("no_such_camera", ImageType::kScene)->empty());
  CHECK(*client->ListVehicles() == std::vector<std::string>{"PhysXCar"});
  // The server's own error string comes back.
  absl::Status unknown = client->Call("noSuchMethod", 0, nullptr).status();
  CHECK(absl::IsUnknown(unknown));
  CHECK(unknown.message() ==
        "airsim noSuchMethod: rpclib: server could not find function 'noSuchMethod' with "
        "argument count 0.");
}

TEST_CASE("DrivingEnv sees the same episode in-process and through convoy_sim",
          "[airsim_protocol]") {
  EmbeddedSimOptions sim_options;
  sim_options.world = TestWorld();
  sim_options.num_parked_cars = 25;
  sim_options.seed = 3;
  AirSimServerOptions server_options = ServerOptions();
  server_options.sim = sim_options;
  std::unique_ptr<AirSimServer> server = StartServer(server_options);
  const bool pipeline = GENERATE(true, false);
  INFO("pipeline " << pipeline);
  AirSimClientOptions client_options;
  client_options.port = server->port();
  client_options.pipeline = pipeline;
  std::unique_ptr<AirSimClient> client = *AirSimClient::Connect(client_options);
  for (ObservationKind kind : {ObservationKind::kCookbookCrop, ObservationKind::kGray84}) {
    DrivingEnvOptions env_options;
    env_options.observation = kind;
    env_options.frame_stack = 2;
    std::unique_ptr<DrivingEnv> local = *DrivingEnv::CreateEmbedded(sim_options, env_options);
    std::unique_ptr<DrivingEnv> remote =
        *DrivingEnv::Create(client.get(), TestWorld()->map(), env_options);
    std::vector<uint8_t> a(local->observation_size()), b(remote->observation_size());
    uint64_t seed = 100;
    StepResult ra = *local->Reset(seed, a.data());
    StepResult rb = *remote->Reset(seed, b.data());
    REQUIRE(a == b);
    int episodes = 0;
    for (int i = 0; i < 150; ++i) {
      const int action = (i * 5 + i / 7) % 5;
      absl::StatusOr<StepResult> sa = local->Step(action, a.data());
      absl::StatusOr<StepResult> sb = remote->Step(action, b.data());
      REQUIRE(sa.ok());
      REQUIRE(sb.ok());
      REQUIRE(a == b);
      REQUIRE(sa->reward == sb->reward);
      REQUIRE(sa->done == sb->done);
      REQUIRE(sa->reason == sb->reason);
      REQUIRE(sa->car.x == sb->car.x);
      REQUIRE(sa->car.speed == sb->car.speed);
      if (sa->done) {
        ++episodes;
        ++seed;
        REQUIRE(local->Reset(seed, a.data()).ok());
        REQUIRE(remote->Reset(seed, b.data()).ok());
        REQUIRE(a == b);
      }
    }
    CHECK(episodes >= 1);
  }
}

TEST_CASE("malformed input closes only that connection", "[airsim_protocol][robustness]") {
  std::unique_ptr<AirSimServer> server = StartServer();
  RawConnection healthy(server->port());
  CHECK(Call(healthy, 1, "ping", 0).result().via.boolean);

  SECTION("random bytes") {
    std::mt19937 rng(1234);
    for (int round = 0; round < 20; ++round) {
      RawConnection c(server->port());
      std::string junk(1 + rng() % 2000, '\0');
      for (char& ch : junk) ch = static_cast<char>(rng());
      c.Send(junk);
      // Whatever the server made of it (an error reply, a close, or waiting for more), it must
      // neither crash nor stop serving others.
      c.Read(absl::Milliseconds(20));
    }
  }
  SECTION("a huge length prefix") {
    RawConnection c(server->port());
    // [0, 1, "ping", bin32 of 4 GiB ...
    REQUIRE(
        c.Send(Bytes({0x94, 0x00, 0x01, 0xa4, 'p', 'i', 'n', 'g', 0xc6, 0xff, 0xff, 0xff, 0xff})));
    CHECK(c.ClosedByServer());
    RawConnection d(server->port());
    REQUIRE(d.Send(Bytes({0xdd, 0x7f, 0xff, 0xff, 0xff})));  // array32 of 2^31 elements
    CHECK(d.ClosedByServer());
  }
  SECTION("a message over max_message_bytes") {
    RawConnection c(server->port());
    // [0, 1, "ping", [65535 nils]]: large but within the limits, answered with an arity error.
    std::string big = Bytes({0x94, 0x00, 0x01, 0xa4, 'p', 'i', 'n', 'g', 0xdc, 0xff, 0xff});
    big += std::string(65535, '\xc0');
    REQUIRE(c.Send(big));
    std::optional<msgpack::object_handle> reply = c.Read();
    REQUIRE(reply.has_value());  // an arity error, answered
    RawConnection d(server->port());
    // [0, 1, "ping", [str32 of 2 MiB]]: over the server's 1 MiB limit, refused at the prefix.
    REQUIRE(d.Send(
        Bytes({0x94, 0x00, 0x01, 0xa4, 'p', 'i', 'n', 'g', 0x91, 0xdb, 0x00, 0x20, 0x00, 0x00})));
    CHECK(d.ClosedByServer());
  }
  SECTION("a truncated frame is dropped after the partial-message timeout") {
    RawConnection c(server->port());
    const std::string request = Request(5, "getCarState", 1, [](Packer& pk) { Write(pk, ""); });
    REQUIRE(c.Send(request.substr(0, request.size() / 2)));
    CHECK(c.ClosedByServer());
    // A truncated frame followed by a disconnect is simply forgotten.
    {
      RawConnection e(server->port());
      REQUIRE(e.Send(request.substr(0, 3)));
    }
  }
  SECTION("messages that are not requests") {
    RawConnection c(server->port());
    REQUIRE(c.Send("\x81\xa1k\xa1v"));  // a map
    CHECK(c.ClosedByServer());
    RawConnection d(server->port());
    REQUIRE(d.Send(Bytes({0x94, 0x01, 0x00, 0xc0, 0xc0})));  // a response, sent to the server
    CHECK(d.ClosedByServer());
  }
  CHECK(Call(healthy, 2, "ping", 0).result().via.boolean);
  RawConnection fresh(server->port());
  CHECK(Call(fresh, 3, "getServerVersion", 0).result().via.u64 == 1);
  CHECK(server->stats().connections_accepted >= 2);
}

TEST_CASE("many concurrent connections are served", "[airsim_protocol]") {
  std::unique_ptr<AirSimServer> server = StartServer();
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      AirSimClientOptions options;
      options.port = server->port();
      absl::StatusOr<std::unique_ptr<AirSimClient>> client = AirSimClient::Connect(options);
      if (!client.ok()) return;
      std::vector<ImageResponse> images;
      for (int i = 0; i < 25; ++i) {
        if ((*client)->GetState().ok() && (*client)->GetImages({ImageRequest{}}, &images).ok())
          ++ok;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  CHECK(ok.load() == 8 * 25);
}

TEST_CASE("connections over max_connections are refused and counted", "[airsim_protocol]") {
  AirSimServerOptions options = ServerOptions();
  options.max_connections = 2;
  std::unique_ptr<AirSimServer> server = StartServer(options);
  RawConnection a(server->port()), b(server->port());
  CHECK(Call(a, 1, "ping", 0).result().via.boolean);
  CHECK(Call(b, 1, "ping", 0).result().via.boolean);
  RawConnection c(server->port());
  CHECK(c.ClosedByServer());
  CHECK(server->stats().connections_refused == 1);
  CHECK(Call(a, 2, "ping", 0).result().via.boolean);
}

TEST_CASE("each vehicle is its own car and \"\" is the first configured", "[airsim_protocol]") {
  AirSimServerOptions options = ServerOptions();
  options.vehicle_names = {"PhysXCar", "Car2"};
  std::unique_ptr<AirSimServer> server = StartServer(options);
  std::unique_ptr<AirSimClient> first = ConnectClient(server->port());
  AirSimClientOptions second_options;
  second_options.port = server->port();
  second_options.vehicle_name = "Car2";
  std::unique_ptr<AirSimClient> second = *AirSimClient::Connect(second_options);
  CHECK(*first->ListVehicles() == std::vector<std::string>{"PhysXCar", "Car2"});
  Pose pose;
  pose.position = {-127.9f, -150.0f, 0.0f};
  REQUIRE(second->SetPose(pose, true).ok());
  CHECK(second->GetPose()->position.y_val == -150.0f);
  CHECK(first->GetPose()->position.y_val != -150.0f);  // "" is PhysXCar, untouched
  CarControls go;
  go.throttle = 1.0f;
  REQUIRE(first->SetControls(go).ok());
  REQUIRE(first->ContinueForTime(absl::Seconds(1)).ok());  // the clock is shared
  CHECK(first->GetState()->speed > 2.0f);
  CHECK(second->GetState()->speed == 0.0f);
  CHECK(second->GetState()->timestamp == first->GetState()->timestamp);
}

TEST_CASE("real-time mode advances the clock until paused", "[airsim_protocol]") {
  std::unique_ptr<AirSimServer> server = StartServer(ServerOptions(SimClockMode::kRealTime));
  std::unique_ptr<AirSimClient> client = ConnectClient(server->port());
  CHECK_FALSE(*client->IsPaused());
  uint64_t t0 = client->GetState()->timestamp;
  for (int i = 0; i < 100 && client->GetState()->timestamp == t0; ++i) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  CHECK(client->GetState()->timestamp > t0);
  REQUIRE(client->Pause(true).ok());
  const uint64_t paused_at = client->GetState()->timestamp;
  // A negative check: real time passes to show that the paused clock does not move.
  absl::SleepFor(absl::Milliseconds(150));
  CHECK(client->GetState()->timestamp == paused_at);
  REQUIRE(client->ContinueForTime(absl::Milliseconds(500)).ok());
  CHECK(client->GetState()->timestamp == paused_at + 500000000u);
  CHECK(*client->IsPaused());
}

TEST_CASE("the client reconnects after the server restarts and reports an absent server",
          "[airsim_protocol]") {
  std::unique_ptr<AirSimServer> server = StartServer();
  const int port = server->port();
  std::unique_ptr<AirSimClient> client = ConnectClient(port);
  REQUIRE(client->Ping().ok());
  server->Stop();
  server.reset();
  // The old connection is gone: the first call fails (it may have been sent), and reconnecting
  // to nothing fails after the bounded attempts.
  CHECK_FALSE(client->Ping().ok());
  absl::Status absent = client->Ping().status();
  CHECK(absl::IsUnavailable(absent));
  AirSimServerOptions options = ServerOptions();
  options.port = port;
  server = StartServer(options);
  absl::StatusOr<bool> ping = client->Ping();
  REQUIRE(ping.ok());
  CHECK(*ping);
  CHECK(client->connections() == 2);

  AirSimClientOptions nowhere;
  nowhere.port = port;
  nowhere.max_reconnect_attempts = 1;
  nowhere.backoff.initial = absl::Milliseconds(5);
  server.reset();
  absl::StatusOr<std::unique_ptr<AirSimClient>> none = AirSimClient::Connect(nowhere);
  CHECK(absl::IsUnavailable(none.status()));
}

// A client that only looks: it leaves API control and the pause state alone.
std::unique_ptr<AirSimClient> ConnectObserver(int port) {
  AirSimClientOptions options;
  options.port = port;
  options.enable_api_control = false;
  absl::StatusOr<std::unique_ptr<AirSimClient>> client = AirSimClient::Connect(options);
  REQUIRE(client.ok());
  return *std::move(client);
}

// Stops `server` and starts a fresh one (API control off, its own clock) on the same port.
std::unique_ptr<AirSimServer> Restart(std::unique_ptr<AirSimServer> server,
                                      AirSimServerOptions options) {
  options.port = server->port();
  server->Stop();
  server.reset();
  return StartServer(options);
}

TEST_CASE("a reconnect enables API control again, so the car drives after a server restart",
          "[airsim_protocol][reconnect]") {
  std::unique_ptr<AirSimServer> server = StartServer();
  std::unique_ptr<AirSimClient> client = ConnectClient(server->port());
  REQUIRE(*client->IsApiControlEnabled());

  server = Restart(std::move(server), ServerOptions());
  std::unique_ptr<AirSimClient> observer = ConnectObserver(server->port());
  REQUIRE_FALSE(*observer->IsApiControlEnabled());  // a fresh server starts without it

  // Reconnect. (That the first call after the restart already succeeds is another test's.)
  client->Ping().IgnoreError();
  REQUIRE(client->Ping().ok());
  CHECK(client->connections() == 2);
  CHECK(*observer->IsApiControlEnabled());

  CarControls controls;
  controls.throttle = 1.0f;
  REQUIRE(client->SetControls(controls).ok());
  CHECK(observer->GetControls()->throttle == 1.0f);
  REQUIRE(client->ContinueForTime(absl::Seconds(1)).ok());
  absl::StatusOr<CarState> state = observer->GetState();
  REQUIRE(state.ok());
  CHECK(state->speed > 2.0f);
}

TEST_CASE("a reconnect pauses a restarted real-time server again", "[airsim_protocol][reconnect]") {
  const AirSimServerOptions options = ServerOptions(SimClockMode::kRealTime);
  std::unique_ptr<AirSimServer> server = StartServer(options);
  std::unique_ptr<AirSimClient> client = ConnectClient(server->port());
  REQUIRE(client->Pause(true).ok());

  server = Restart(std::move(server), options);
  std::unique_ptr<AirSimClient> observer = ConnectObserver(server->port());
  REQUIRE_FALSE(*observer->IsPaused());  // a fresh real-time server runs

  client->Ping().IgnoreError();
  REQUIRE(client->Ping().ok());
  CHECK(*observer->IsPaused());
  const uint64_t paused_at = observer->GetState()->timestamp;
  // A negative check: real time passes to show that the paused clock does not move.
  absl::SleepFor(absl::Milliseconds(150));
  CHECK(observer->GetState()->timestamp == paused_at);
}

TEST_CASE("a call after the server closed the idle connection reconnects instead of failing",
          "[airsim_protocol][reconnect]") {
  std::unique_ptr<AirSimServer> server = StartServer();
  std::unique_ptr<AirSimClient> client = ConnectClient(server->port());
  server = Restart(std::move(server), ServerOptions());
  // Nothing was sent on the closed connection, so nothing is lost by sending it on a new one.
  absl::StatusOr<bool> ping = client->Ping();
  REQUIRE(ping.ok());
  CHECK(*ping);
  CHECK(client->connections() == 2);
}

TEST_CASE("a reconnect that cannot restore the session fails with the server's reason",
          "[airsim_protocol][reconnect]") {
  AirSimServerOptions two_cars = ServerOptions();
  two_cars.vehicle_names = {"PhysXCar", "Car2"};
  std::unique_ptr<AirSimServer> server = StartServer(two_cars);
  AirSimClientOptions options;
  options.port = server->port();
  options.vehicle_name = "Car2";
  options.max_reconnect_attempts = 1;
  options.backoff.initial = absl::Milliseconds(5);
  std::unique_ptr<AirSimClient> client = *AirSimClient::Connect(options);
  REQUIRE(*client->IsApiControlEnabled());

  server = Restart(std::move(server), ServerOptions());  // only PhysXCar now
  client->Ping().IgnoreError();  // before noticing closed connections, the first call failed
  absl::Status status = client->Ping().status();
  CHECK(absl::IsUnknown(status));
  CHECK(absl::StrContains(status.message(), "restoring the session: airsim enableApiControl"));
  CHECK(absl::StrContains(status.message(), "Vehicle API for 'Car2' is not available"));
}

TEST_CASE("a DrivingEnv step through convoy_sim is one round trip of six requests",
          "[airsim_protocol][round_trips]") {
  std::unique_ptr<AirSimServer> server = StartServer();
  for (const bool pipeline : {true, false}) {
    DYNAMIC_SECTION("pipeline " << pipeline) {
      AirSimClientOptions options;
      options.port = server->port();
      options.pipeline = pipeline;
      std::unique_ptr<AirSimClient> client = *AirSimClient::Connect(options);
      CHECK(client->server_answers_in_order() == pipeline);
      std::unique_ptr<DrivingEnv> env =
          *DrivingEnv::Create(client.get(), TestWorld()->map(), DrivingEnvOptions{});
      std::vector<uint8_t> obs(env->observation_size());
      REQUIRE(env->Reset(7, obs.data()).ok());
      for (int i = 0; i < 5; ++i) {
        const int64_t trips = client->round_trips();
        const int64_t requests = server->stats().requests;
        absl::StatusOr<StepResult> r = env->Step(2, obs.data());
        REQUIRE(r.ok());
        REQUIRE_FALSE(r->done);
        // setCarControls, simContinueForTime, simIsPaused, getCarState, simGetCollisionInfo,
        // simGetImages; without pipelining each call that must precede the next waits for it.
        CHECK(server->stats().requests - requests == 6);
        CHECK(client->round_trips() - trips == (pipeline ? 1 : 4));
      }
    }
  }
}

// A fake AirSim that confirms the connection and answers simGetImages with a 4-channel
// (pre-1.3) image, then with a malformed one.
TEST_CASE("the client accepts 4-channel images and rejects other sizes", "[airsim_protocol]") {
  int port = 0;
  absl::StatusOr<ScopedFd> listener = ListenTcp("127.0.0.1", 0, &port);
  REQUIRE(listener.ok());
  std::thread fake([fd = listener->get()] {
    ScopedFd conn(::accept(fd, nullptr, nullptr));
    msgpack::unpacker up;
    msgpack::object_handle h;
    int images = 0;
    while (images < 2) {
      if (!WaitReadable(conn.get(), absl::Now() + absl::Seconds(10)).ok()) return;
      up.reserve_buffer(1 << 16);
      const ssize_t n = ::recv(conn.get(), up.buffer(), up.buffer_capacity(), 0);
      if (n <= 0) return;
      up.buffer_consumed(static_cast<size_t>(n));
      while (up.next(h)) {
        const std::string method = h.get().via.array.ptr[2].as<std::string>();
        msgpack::sbuffer out;
        Packer pk(out);
        pk.pack_array(4);
        pk.pack_int(1);
        pk.pack_uint32(h.get().via.array.ptr[1].as<uint32_t>());
        pk.pack_nil();
        if (method == "ping") {
          Write(pk, true);
        } else if (method == "getServerVersion" || method == "getMinRequiredClientVersion") {
          pk.pack_int(1);
        } else if (method == "simGetImages") {
          ImageResponse r;
          r.width = 4;
          r.height = 2;
          r.image_data_uint8.assign(images == 0 ? 4 * 2 * 4 : 4 * 2 * 5, 7);
          Write(pk, std::vector<ImageResponse>{r});
          ++images;
        } else {
          pk.pack_nil();
        }
        SendAll(conn.get(), out.data(), out.size(), absl::Now() + absl::Seconds(5)).IgnoreError();
      }
    }
  });
  AirSimClientOptions options;
  options.port = port;
  absl::StatusOr<std::unique_ptr<AirSimClient>> client = AirSimClient::Connect(options);
  REQUIRE(client.ok());
  CHECK_FALSE((*client)->server_answers_in_order());  // it answers convoyServerInfo with nil
  std::vector<ImageResponse> images;
  REQUIRE((*client)->GetImages({ImageRequest{}}, &images).ok());
  CHECK(images[0].image_data_uint8.size() == 4u * 2u * 4u);
  absl::Status bad = (*client)->GetImages({ImageRequest{}}, &images);
  CHECK(absl::IsDataLoss(bad));
  fake.join();
}

TEST_CASE("dumping frames writes the served scene images as PNG", "[airsim_protocol]") {
  char dir_template[] = "/tmp/convoy_frames_XXXXXX";
  REQUIRE(mkdtemp(dir_template) != nullptr);
  const std::string dir = dir_template;
  AirSimServerOptions options = ServerOptions();
  options.dump_frames_dir = dir;
  std::unique_ptr<AirSimServer> server = StartServer(options);
  std::unique_ptr<AirSimClient> client = ConnectClient(server->port());
  std::vector<ImageResponse> images;
  REQUIRE(client->GetImages({ImageRequest{}}, &images).ok());
  REQUIRE(client->GetImages({ImageRequest{}}, &images).ok());
  for (const char* name : {"/PhysXCar_00000000.png", "/PhysXCar_00000001.png"}) {
    FILE* f = std::fopen((dir + name).c_str(), "rb");
    REQUIRE(f != nullptr);
    std::vector<uint8_t> png(1 << 20);
    png.resize(std::fread(png.data(), 1, png.size(), f));
    std::fclose(f);
    int w, h, channels;
    CHECK(DecodePng(png, &w, &h, &channels).ok());
    CHECK(w == 256);
    std::remove((dir + name).c_str());
  }
  ::rmdir(dir.c_str());
}

}  // namespace
}  // namespace convoy::sim
