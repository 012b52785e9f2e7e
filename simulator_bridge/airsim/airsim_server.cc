#include "simulator_bridge/airsim/airsim_server.h"

#include <arpa/inet.h>
#include <glog/logging.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <regex>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/support/status_macros.h"
#include "simulator_bridge/airsim/airsim_codec.h"
#include "simulator_bridge/world/png.h"

namespace convoy::sim {

using airsim::Packer;
using airsim::Read;
using airsim::Write;

struct AirSimServer::Connection {
  ScopedFd fd;
  std::string peer;
  std::thread thread;
  std::atomic<bool> done{false};
};

namespace {

constexpr size_t kReadChunk = 64 * 1024;
// Results at least this large are sent from their own buffer instead of copied into the replies.
constexpr size_t kCopyResultBelow = 16 * 1024;
constexpr absl::Duration kPollInterval = absl::Milliseconds(200);

std::string Peer(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return "?";
  char host[64] = "?";
  int port = 0;
  if (addr.ss_family == AF_INET) {
    auto* a = reinterpret_cast<sockaddr_in*>(&addr);
    inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
    port = ntohs(a->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&addr);
    inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
    port = ntohs(a->sin6_port);
  }
  return absl::StrCat(host, ":", port);
}

}  // namespace

// The methods of AIRSIM_PROTOCOL.md. Each reads its arguments (count already checked), does its
// work under the simulation lock and writes its result; a non-OK status becomes rpclib's
// "threw an exception" error with the status message as the exception text.
class AirSimServer::Handler {
 public:
  using Fn = absl::Status (*)(AirSimServer& server, const msgpack::object* args, Packer& out);
  struct Method {
    size_t arity;
    Fn fn;
  };

  static const absl::flat_hash_map<std::string, Method>& Methods() {
    static const auto* methods = new absl::flat_hash_map<std::string, Method>{
        {"ping", {0, &Ping}},
        {"getServerVersion", {0, &Version}},
        {"getMinRequiredClientVersion", {0, &Version}},
        {"reset", {0, &Reset}},
        {"enableApiControl", {2, &EnableApiControl}},
        {"isApiControlEnabled", {1, &IsApiControlEnabled}},
        {"armDisarm", {2, &ArmDisarm}},
        {"simPause", {1, &SimPause}},
        {"simIsPaused", {0, &SimIsPaused}},
        {"simContinueForTime", {1, &SimContinueForTime}},
        {"simContinueForFrames", {1, &SimContinueForFrames}},
        {"getCarState", {1, &GetCarState}},
        {"setCarControls", {2, &SetCarControls}},
        {"getCarControls", {1, &GetCarControls}},
        {"simGetImages", {3, &SimGetImages}},
        {"simGetImage", {4, &SimGetImage}},
        {"simGetCollisionInfo", {1, &SimGetCollisionInfo}},
        {"simGetVehiclePose", {1, &SimGetVehiclePose}},
        {"simSetVehiclePose", {3, &SimSetVehiclePose}},
        {"simGetGroundTruthKinematics", {1, &SimGetGroundTruthKinematics}},
        {"listVehicles", {0, &ListVehicles}},
        {"simListSceneObjects", {1, &SimListSceneObjects}},
        {"simGetObjectPose", {1, &SimGetObjectPose}},
        {"convoyServerInfo", {0, &ConvoyServerInfo}},
    };
    return *methods;
  }

 private:
  static absl::StatusOr<Vehicle*> Find(AirSimServer& s, const msgpack::object& name_object)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.sim_mu_) {
    std::string name;
    CONVOY_RETURN_IF_ERROR(Read(name_object, &name));
    // "" is the default vehicle: the first one configured.
    auto it = s.vehicles_.find(name.empty() ? s.options_.vehicle_names.front() : name);
    if (it == s.vehicles_.end()) {
      return absl::NotFoundError(absl::StrCat(
          "Vehicle API for '", name,
          "' is not available. This could either because this is simulation-only API or this "
          "vehicle does not exist"));
    }
    return &it->second;
  }

  static absl::Status Ping(AirSimServer&, const msgpack::object*, Packer& out) {
    Write(out, true);
    return absl::OkStatus();
  }
  static absl::Status Version(AirSimServer&, const msgpack::object*, Packer& out) {
    Write(out, int32_t{airsim::kProtocolVersion});
    return absl::OkStatus();
  }
  static absl::Status Reset(AirSimServer& s, const msgpack::object*, Packer& out) {
    absl::MutexLock lock(&s.sim_mu_);
    for (auto& [name, vehicle] : s.vehicles_) {
      CONVOY_RETURN_IF_ERROR(vehicle.sim->Reset());
    }
    out.pack_nil();
    return absl::OkStatus();
  }
  static absl::Status EnableApiControl(AirSimServer& s, const msgpack::object* a, Packer& out) {
    bool enable;
    CONVOY_RETURN_IF_ERROR(Read(a[0], &enable));
    absl::MutexLock lock(&s.sim_mu_);
    CONVOY_ASSIGN_OR_RETURN(Vehicle* v, Find(s, a[1]));
    v->api_control = enable;
    out.pack_nil();
    return absl::OkStatus();
  }
  static absl::Status IsApiControlEnabled(AirSimServer& s, const msgpack::object* a, Packer& out) {
    absl::MutexLock lock(&s.sim_mu_);
    CONVOY_ASSIGN_OR_RETURN(Vehicle* v, Find(s, a[0]));
    Write(out, v->api_control);
    return absl::OkStatus();
  }
  static absl::Status ArmDisarm(AirSimServer& s, const msgpack::object* a, Packer& out) {
    bool arm;
    CONVOY_RETURN_IF_ERROR(Read(a[0], &arm));
    absl::MutexLock lock(&s.sim_mu_);
    CONVOY_RETURN_IF_ERROR(Find(s, a[1]).status());
    Write(out, true);
    return absl::OkStatus();
  }
  static absl::Status SimPause(AirSimServer& s, const msgpack::object* a, Packer& out) {
    bool pause;
    CONVOY_RETURN_IF_ERROR(Read(a[0], &pause));
    absl::MutexLock lock(&s.sim_mu_);
    // Lock-step time never flows on its own: it stays paused whatever is asked.
    s.paused_ = pause || s.options_.clock == SimClockMode::kLockStep;
    out.pack_nil();
    return absl::OkStatus();
  }
  static absl::Status SimIsPaused(AirSimServer& s, const msgpack::object*, Packer& out) {
    absl::MutexLock lock(&s.sim_mu_);
    Write(out, s.paused_);
    return absl::OkStatus();
  }
  static absl::Status Advance(AirSimServer& s, int64_t steps)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.sim_mu_) {
    for (auto& [name, vehicle] : s.vehicles_) {
      vehicle.sim->Step(steps);
      vehicle.steps += steps;
    }
    s.paused_ = true;
    return absl::OkStatus();
  }
  static absl::Status SimContinueForTime(AirSimServer& s, const msgpack::object* a, Packer& out) {
    double seconds;
    CONVOY_RETURN_IF_ERROR(Read(a[0], &seconds));
    const double step = s.options_.sim.step_seconds;
    if (!std::isfinite(seconds) || seconds < 0 || seconds / step > 1e6) {
      return absl::InvalidArgumentError(
          absl::StrCat("simContinueForTime: seconds must be in [0, ", 1e6 * step, "]"));
    }
    absl::MutexLock lock(&s.sim_mu_);
    const int64_t steps = seconds > 0 ? std::max<int64_t>(1, std::llround(seconds / step)) : 0;
    CONVOY_RETURN_IF_ERROR(Advance(s, steps));
    out.pack_nil();
    return absl::OkStatus();
  }
  static absl::Status SimContinueForFrames(AirSimServer& s, const msgpack::object* a, Packer& out) {
    uint32_t frames;
    CONVOY_RETURN_IF_ERROR(Read(a[0], &frames));
    if (frames > 1000000)
      return absl::InvalidArgumentError("simContinueForFrames: at most 1000000");
    absl::MutexLock lock(&s.sim_mu_);
    CONVOY_RETURN_IF_ERROR(Advance(s, frames));
    out.pack_nil();
    return absl::OkStatus();
  }
  static absl::Status GetCarState(AirSimServer& s, const msgpack::object* a, Packer& out) {
    absl::MutexLock lock(&s.sim_mu_);
    CONVOY_ASSIGN_OR_RETURN(Vehicle* v, Find(s, a[0]));
    CONVOY_ASSIGN_OR_RETURN(CarState state, v->sim->GetState());
    Write(out, state);
    return absl::OkStatus();
  }
  static absl::Status SetCarControls(AirSimServer& s, const msgpack::object* a, Packer& out) {
    CarControls controls;
    CONVOY_RETURN_IF_ERROR(Read(a[0], &controls));
    absl::MutexLock lock(&s.sim_mu_);
    CONVOY_ASSIGN_OR_RETURN(Vehicle* v, Find(s, a[1]));
    // As in AirSim, controls from the API apply only under API control.
    if (v->api_control) {
      CONVOY_RETURN_IF_ERROR(v->sim->SetControls(controls));
    } else {
      LOG_EVERY_N(WARNING, 100) << "setCarControls ignored: API control is not enabled "
                                   "(call enableApiControl(true) first)";
    }
    out.pack_nil();
    return absl::OkStatus();
  }
  static absl::Status GetCarControls(AirSimServer& s, const msgpack::object* a, Packer& out) {
    absl::MutexLock lock(&s.sim_mu_);
    CONVOY_ASSIGN_OR_RETURN(Vehicle* v, Find(s, a[0]));
    Write(out, v->sim->controls());
    return absl::OkStatus();
  }
  static void DumpFrames(AirSimServer& s, const std::string& vehicle,
                         const std::vector<ImageResponse>& responses)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.sim_mu_) {
    if (s.options_.dump_frames_dir.empty()) return;
    for (const ImageResponse& r : responses) {
      if (r.image_type != ImageType::kScene || r.compress || r.width == 0) continue;
      const std::string path = absl::StrFormat("%s/%s_%08d.png", s.options_.dump_frames_dir,
                                               vehicle, s.dumped_frames_++);
      if (absl::Status st =
              WritePng(path, r.image_data_uint8.data(), r.width, r.height, PixelOrder::kBgr);
          !st.ok()) {
        LOG_EVERY_N(WARNING, 100) << "--dump_frames: " << st;
      }
    }
  }
  static absl::Status SimGetImages(AirSimServer& s, const msgpack::object* a, Packer& out) {
    std::vector<ImageRequest> requests;
    CONVOY_RETURN_IF_ERROR(Read(a[0], &requests));
    bool external;
    CONVOY_RETURN_IF_ERROR(Read(a[2], &external));
    if (requests.size() > 64) return absl::InvalidArgumentError("at most 64 image requests");
    absl::MutexLock lock(&s.sim_mu_);
    CONVOY_ASSIGN_OR_RETURN(Vehicle* v, Find(s, a[1]));
    std::vector<ImageResponse>& responses = v->responses;
    if (external) {
      responses.assign(requests.size(), ImageResponse{});
      for (size_t i = 0; i < requests.size(); ++i) {
        responses[i].camera_name = requests[i].camera_name;
        responses[i].image_type = requests[i].image_type;
        responses[i].message = "the embedded simulator has no external cameras";
      }
    } else {
      CONVOY_RETURN_IF_ERROR(v->sim->GetImages(requests, &responses));
    }
    std::string name;
    Read(a[1], &name).IgnoreError();
    DumpFrames(s, name.empty() ? s.options_.vehicle_names.front() : name, responses);
    Write(out, responses);
    return absl::OkStatus();
  }
  static absl::Status SimGetImage(AirSimServer& s, const msgpack::object* a, Packer& out) {
    ImageRequest request;
    CONVOY_RETURN_IF_ERROR(Read(a[0], &request.camera_name));
    CONVOY_RETURN_IF_ERROR(Read(a[1], &request.image_type));
    bool external;
    CONVOY_RETURN_IF_ERROR(Read(a[3], &external));
    request.compress = true;
    absl::MutexLock lock(&s.sim_mu_);
    CONVOY_ASSIGN_OR_RETURN(Vehicle* v, Find(s, a[2]));
    std::vector<ImageResponse>& responses = v->responses;
    if (external) {
      responses.assign(1, ImageResponse{});
    } else if (absl::Status st = v->sim->GetImages({request}, &responses); !st.ok()) {
      return st;
    }
    Write(out, responses[0].image_data_uint8);  // empty when it failed
    return absl::OkStatus();
  }
  static absl::Status SimGetCollisionInfo(AirSimServer& s, const msgpack::object* a, Packer& out) {
    absl::MutexLock lock(&s.sim_mu_);
    CONVOY_ASSIGN_OR_RETURN(Vehicle* v, Find(s, a[0]));
    CONVOY_ASSIGN_OR_RETURN(CollisionInfo info, v->sim->GetCollisionInfo());
    Write(out, info);
    return absl::OkStatus();
  }
  static absl::Status SimGetVehiclePose(AirSimServer& s, const msgpack::object* a, Packer& out) {
    absl::MutexLock lock(&s.sim_mu_);
    CONVOY_ASSIGN_OR_RETURN(Vehicle* v, Find(s, a[0]));
    CONVOY_ASSIGN_OR_RETURN(Pose pose, v->sim->GetPose());
    Write(out, pose);
    return absl::OkStatus();
  }
  static absl::Status SimSetVehiclePose(AirSimServer& s, const msgpack::object* a, Packer& out) {
    Pose pose;
    CONVOY_RETURN_IF_ERROR(Read(a[0], &pose));
    bool ignore_collision;
    CONVOY_RETURN_IF_ERROR(Read(a[1], &ignore_collision));
    absl::MutexLock lock(&s.sim_mu_);
    CONVOY_ASSIGN_OR_RETURN(Vehicle* v, Find(s, a[2]));
    CONVOY_RETURN_IF_ERROR(v->sim->SetPose(pose, ignore_collision));
    out.pack_nil();
    return absl::OkStatus();
  }
  static absl::Status SimGetGroundTruthKinematics(AirSimServer& s, const msgpack::object* a,
                                                  Packer& out) {
    absl::MutexLock lock(&s.sim_mu_);
    CONVOY_ASSIGN_OR_RETURN(Vehicle* v, Find(s, a[0]));
    CONVOY_ASSIGN_OR_RETURN(CarState state, v->sim->GetState());
    Write(out, state.kinematics_estimated);
    return absl::OkStatus();
  }
  // Not AirSim's: tells AirSimClient that this server executes a connection's requests one at a
  // time, in order, so it may pipeline calls that depend on one another.
  static absl::Status ConvoyServerInfo(AirSimServer&, const msgpack::object*, Packer& out) {
    out.pack_map(2);
    Write(out, "server");
    Write(out, "convoy_sim");
    Write(out, "answers_in_order");
    Write(out, true);
    return absl::OkStatus();
  }
  // The scene's other cars, as AirSim lists its scene's objects: the parked and moving cars of the
  // default (first) vehicle's world, then the vehicles. Names matching the whole ECMAScript
  // regular expression, as AirSim's std::regex_match.
  static absl::Status SimListSceneObjects(AirSimServer& s, const msgpack::object* a, Packer& out) {
    std::string pattern;
    CONVOY_RETURN_IF_ERROR(Read(a[0], &pattern));
    std::regex re;
    try {
      re = std::regex(pattern);
    } catch (const std::regex_error& e) {
      return absl::InvalidArgumentError(
          absl::StrCat("simListSceneObjects: bad regular expression '", pattern, "'"));
    }
    absl::MutexLock lock(&s.sim_mu_);
    std::vector<const std::string*> names;
    for (const Obstacle& o : s.vehicles_.at(s.options_.vehicle_names.front()).sim->obstacles()) {
      if (std::regex_match(o.name, re)) names.push_back(&o.name);
    }
    for (const std::string& name : s.options_.vehicle_names) {
      if (std::regex_match(name, re)) names.push_back(&name);
    }
    out.pack_array(static_cast<uint32_t>(names.size()));
    for (const std::string* name : names) Write(out, *name);
    return absl::OkStatus();
  }
  // Where a scene object (simListSceneObjects' names) is now; as AirSim, a pose of NaNs for a name
  // that is not in the scene.
  static absl::Status SimGetObjectPose(AirSimServer& s, const msgpack::object* a, Packer& out) {
    std::string name;
    CONVOY_RETURN_IF_ERROR(Read(a[0], &name));
    absl::MutexLock lock(&s.sim_mu_);
    Pose pose;
    const float nan = std::numeric_limits<float>::quiet_NaN();
    pose.position = {nan, nan, nan};
    pose.orientation = {nan, nan, nan, nan};
    if (auto it = s.vehicles_.find(name); it != s.vehicles_.end()) {
      CONVOY_ASSIGN_OR_RETURN(pose, it->second.sim->GetPose());
    } else {
      for (const Obstacle& o : s.vehicles_.at(s.options_.vehicle_names.front()).sim->obstacles()) {
        if (o.name != name) continue;
        pose.position = {static_cast<float>(o.center.x), static_cast<float>(o.center.y), 0.0f};
        pose.orientation = QuaternionFromYaw(o.yaw);
        break;
      }
    }
    Write(out, pose);
    return absl::OkStatus();
  }
  static absl::Status ListVehicles(AirSimServer& s, const msgpack::object*, Packer& out) {
    absl::MutexLock lock(&s.sim_mu_);
    out.pack_array(static_cast<uint32_t>(s.options_.vehicle_names.size()));
    for (const std::string& name : s.options_.vehicle_names) Write(out, name);  // configured order
    return absl::OkStatus();
  }
};

absl::StatusOr<std::unique_ptr<AirSimServer>> AirSimServer::Start(
    const AirSimServerOptions& options) {
  if (options.vehicle_names.empty()) return absl::InvalidArgumentError("no vehicles");
  if (options.max_connections < 1) return absl::InvalidArgumentError("max_connections < 1");
  if (options.max_message_bytes < 1024)
    return absl::InvalidArgumentError("max_message_bytes < 1024");
  std::unique_ptr<AirSimServer> server(new AirSimServer(options));
  {
    absl::MutexLock lock(&server->sim_mu_);
    for (const std::string& name : options.vehicle_names) {
      if (name.empty() || server->vehicles_.count(name) > 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("bad or repeated vehicle name '", name, "'"));
      }
      CONVOY_ASSIGN_OR_RETURN(std::unique_ptr<EmbeddedSim> sim, EmbeddedSim::Create(options.sim));
      server->vehicles_[name].sim = std::move(sim);
    }
    server->paused_ = options.clock == SimClockMode::kLockStep;
  }
  if (!options.dump_frames_dir.empty()) {
    ::mkdir(options.dump_frames_dir.c_str(), 0755);
    struct stat st {};
    if (::stat(options.dump_frames_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--dump_frames: cannot create directory ", options.dump_frames_dir));
    }
  }
  if (!IsLoopbackAddress(options.bind_address)) {
    LOG(WARNING) << "convoy_sim listens on " << options.bind_address
                 << ", not loopback: the AirSim protocol has no authentication, anyone who can "
                    "reach this port can drive the cars";
  }
  CONVOY_ASSIGN_OR_RETURN(ScopedFd fd,
                          ListenTcp(options.bind_address, options.port, &server->port_));
  server->listen_fd_ = std::move(fd);
  server->accept_thread_ = std::thread([s = server.get()] { s->AcceptLoop(); });
  if (options.clock == SimClockMode::kRealTime) {
    server->tick_thread_ = std::thread([s = server.get()] { s->TickLoop(); });
  }
  return server;
}

AirSimServer::AirSimServer(const AirSimServerOptions& options) : options_(options) {}

AirSimServer::~AirSimServer() { Stop(); }

void AirSimServer::Stop() {
  if (stopping_.exchange(true)) {
    if (accept_thread_.joinable()) accept_thread_.join();
    return;
  }
  if (accept_thread_.joinable()) accept_thread_.join();
  if (tick_thread_.joinable()) tick_thread_.join();
  ReapConnections(/*all=*/true);
  listen_fd_.reset();
}

AirSimServer::Stats AirSimServer::stats() const {
  Stats stats;
  {
    absl::MutexLock lock(&connections_mu_);
    stats = stats_;
  }
  absl::MutexLock lock(&sim_mu_);
  for (const auto& [name, vehicle] : vehicles_) stats.steps_by_vehicle[name] = vehicle.steps;
  return stats;
}

void AirSimServer::ReapConnections(bool all) {
  std::list<std::unique_ptr<Connection>> finished;
  {
    absl::MutexLock lock(&connections_mu_);
    for (auto it = connections_.begin(); it != connections_.end();) {
      if (all || (*it)->done.load()) {
        if (all) ::shutdown((*it)->fd.get(), SHUT_RDWR);
        finished.splice(finished.end(), connections_, it++);
      } else {
        ++it;
      }
    }
  }
  for (auto& c : finished) {
    if (c->thread.joinable()) c->thread.join();
  }
}

void AirSimServer::AcceptLoop() {
  while (!stopping_.load()) {
    ReapConnections(/*all=*/false);
    if (!WaitReadable(listen_fd_.get(), absl::Now() + kPollInterval).ok()) continue;
    ScopedFd fd(::accept4(listen_fd_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!fd.valid()) {
      if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED) {
        LOG_EVERY_N(WARNING, 100) << "accept: " << std::strerror(errno);
        absl::SleepFor(absl::Milliseconds(50));  // e.g. out of descriptors: do not spin
      }
      continue;
    }
    const int one = 1;
    setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    auto connection = std::make_unique<Connection>();
    connection->peer = Peer(fd.get());
    absl::MutexLock lock(&connections_mu_);
    if (static_cast<int>(connections_.size()) >= options_.max_connections) {
      ++stats_.connections_refused;
      LOG_EVERY_N(WARNING, 10) << "refusing " << connection->peer << ": already "
                               << connections_.size() << " connections (max_connections)";
      continue;  // fd closes here
    }
    ++stats_.connections_accepted;
    connection->fd = std::move(fd);
    Connection* c = connection.get();
    connections_.push_back(std::move(connection));
    c->thread = std::thread([this, c] {
      ServeConnection(c);
      c->done.store(true);
    });
  }
}

void AirSimServer::TickLoop() {
  const absl::Duration step = absl::Seconds(options_.sim.step_seconds);
  absl::Time next = absl::Now();
  while (!stopping_.load()) {
    next += step;
    const absl::Time now = absl::Now();
    if (next > now) absl::SleepFor(std::min(next - now, kPollInterval));
    if (absl::Now() < next) {
      next -= step;  // woke early to check stopping_; retry this tick
      continue;
    }
    {
      absl::MutexLock lock(&sim_mu_);
      if (!paused_) {
        for (auto& [name, vehicle] : vehicles_) {
          vehicle.sim->Step(1);
          ++vehicle.steps;
        }
      }
    }
    // Fall behind by at most a second (e.g. a long image request held the lock), then drop ticks.
    if (absl::Now() - next > absl::Seconds(1)) next = absl::Now();
  }
}

// One connection's requests, read and answered in order. Answers to the requests of one read go
// out together, in one write: pipelined requests get one reply segment train, not one per
// request. A large result (an image) is sent from where the handler wrote it rather than copied
// behind its response header.
class AirSimServer::Session {
 public:
  Session(AirSimServer& server, Connection* c)
      : server_(server),
        c_(c),
        fd_(c->fd.get()),
        unpacker_(nullptr, nullptr, kReadChunk,
                  msgpack::unpack_limit(/*array=*/1 << 16, /*map=*/1 << 12,
                                        /*str=*/server.options_.max_message_bytes,
                                        /*bin=*/server.options_.max_message_bytes, /*ext=*/0,
                                        /*depth=*/32)),
        replies_(64 * 1024),
        result_(64 * 1024) {}

  // Serves until the client closes, the server stops or the connection is closed for a reason
  // (logged and counted when it is an error); then shuts the socket down.
  void Run() {
    while (!server_.stopping_.load() && close_reason_.empty()) {
      if (!ReadAndAnswer()) break;
    }
    if (error_) {
      LOG(WARNING) << "closing connection from " << c_->peer << ": " << close_reason_;
      absl::MutexLock lock(&server_.connections_mu_);
      ++server_.stats_.connections_closed_for_errors;
    }
    ::shutdown(fd_, SHUT_RDWR);
  }

 private:
  // A msgpack-rpc request or notification, its fields checked.
  struct Request {
    bool is_call = false;  // a request, answered; else a notification
    uint32_t msgid = 0;
    absl::string_view method;
    const msgpack::object* params = nullptr;
  };

  // Waits for bytes (up to kPollInterval), reads them and answers every whole message among them;
  // false when the connection is to close at once.
  bool ReadAndAnswer() {
    absl::Status readable = WaitReadable(fd_, absl::Now() + kPollInterval);
    if (!readable.ok()) {
      if (absl::IsDeadlineExceeded(readable)) {
        if (absl::Now() - partial_since_ > server_.options_.partial_message_timeout) {
          close_reason_ = "a partial message waited longer than partial_message_timeout";
          error_ = true;
        }
        return true;
      }
      close_reason_ = std::string(readable.message());
      error_ = true;
      return false;
    }
    unpacker_.reserve_buffer(kReadChunk);
    const ssize_t n = ::recv(fd_, unpacker_.buffer(), unpacker_.buffer_capacity(), 0);
    if (n == 0) return false;  // the client closed
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) return true;
      close_reason_ = absl::StrCat("recv: ", std::strerror(errno));
      error_ = errno != ECONNRESET;
      return false;
    }
    unpacker_.buffer_consumed(static_cast<size_t>(n));
    AnswerRead();
    return true;
  }

  // Answers the whole messages read so far and sends the answers; keeps track of a partial one.
  void AnswerRead() {
    try {
      while (close_reason_.empty() && unpacker_.next(handle_)) {
        if (!Answer(handle_.get())) error_ = true;
      }
    } catch (const std::exception& e) {
      close_reason_ = absl::StrCat("malformed msgpack: ", e.what());
      error_ = true;
    }
    // What was answered goes out even when the rest of the read closes the connection.
    if (!Flush({}) && !error_) error_ = true;
    const size_t pending = unpacker_.message_size();
    if (close_reason_.empty() && pending > server_.options_.max_message_bytes) {
      close_reason_ =
          absl::StrCat("message larger than ", server_.options_.max_message_bytes, " bytes");
      error_ = true;
    }
    if (pending == 0) {
      partial_since_ = absl::InfiniteFuture();
    } else if (partial_since_ == absl::InfiniteFuture()) {
      partial_since_ = absl::Now();
    }
  }

  // Sends the answers gathered, then `tail`; false (with close_reason_ set) when that fails.
  bool Flush(absl::string_view tail) {
    if (replies_.size() == 0 && tail.empty()) return true;
    const absl::string_view buffers[] = {absl::string_view(replies_.data(), replies_.size()), tail};
    absl::Status st = SendAllv(fd_, buffers, absl::Now() + server_.options_.send_timeout);
    replies_.clear();
    if (!st.ok()) {
      if (close_reason_.empty()) {
        close_reason_ = absl::StrCat("cannot send a response: ", st.message());
      }
      return false;
    }
    return true;
  }

  // Answers one message; false (with close_reason_ set) closes the connection.
  bool Answer(const msgpack::object& message) {
    Request request;
    if (!Parse(message, &request)) return false;
    {
      absl::MutexLock lock(&server_.connections_mu_);
      ++server_.stats_.requests;
    }
    const std::string error_text = Call(request);
    if (!request.is_call) return true;
    Packer pk(replies_);
    pk.pack_array(4);
    pk.pack_int(airsim::kResponse);
    pk.pack_uint32(request.msgid);
    if (!error_text.empty()) {
      Write(pk, error_text);
      pk.pack_nil();
      return true;
    }
    pk.pack_nil();
    if (result_.size() < kCopyResultBelow) {
      replies_.write(result_.data(), result_.size());
      return true;
    }
    return Flush(absl::string_view(result_.data(), result_.size()));
  }

  // Checks the message's envelope; false (with close_reason_ set) when it is no msgpack-rpc
  // request or notification.
  bool Parse(const msgpack::object& message, Request* request) {
    if (message.type != msgpack::type::ARRAY ||
        (message.via.array.size != 4 && message.via.array.size != 3)) {
      close_reason_ = "not a msgpack-rpc message (expected an array of 3 or 4)";
      return false;
    }
    const msgpack::object* m = message.via.array.ptr;
    request->is_call = message.via.array.size == 4;
    const int expected_type = request->is_call ? airsim::kRequest : airsim::kNotification;
    if (m[0].type != msgpack::type::POSITIVE_INTEGER ||
        m[0].via.u64 != static_cast<uint64_t>(expected_type)) {
      close_reason_ = "not a msgpack-rpc request or notification (bad type field)";
      return false;
    }
    if (request->is_call && !Read(m[1], &request->msgid).ok()) {
      close_reason_ = "msgpack-rpc request id is not a uint32";
      return false;
    }
    const msgpack::object& method_object = m[request->is_call ? 2 : 1];
    const msgpack::object& params = m[request->is_call ? 3 : 2];
    if ((method_object.type != msgpack::type::STR && method_object.type != msgpack::type::BIN) ||
        params.type != msgpack::type::ARRAY) {
      close_reason_ = "msgpack-rpc method is not a string or params not an array";
      return false;
    }
    // STR and BIN share their layout in msgpack::object.
    request->method = absl::string_view(method_object.via.str.ptr, method_object.via.str.size);
    request->params = &params;
    return true;
  }

  // Runs the request's method, its result into result_; rpclib's error text, or empty.
  std::string Call(const Request& request) {
    const absl::string_view method = request.method;
    const size_t argc = request.params->via.array.size;
    std::string error_text;
    result_.clear();
    Packer result_packer(result_);
    const auto& methods = Handler::Methods();
    auto it = methods.find(method);
    if (it == methods.end()) {
      error_text = airsim::UnknownMethodError(method, argc);
    } else if (it->second.arity != argc) {
      error_text = airsim::ArityError(method, it->second.arity, argc);
    } else {
      absl::Status status = it->second.fn(server_, request.params->via.array.ptr, result_packer);
      if (!status.ok()) error_text = airsim::HandlerError(method, argc, status.message());
    }
    return error_text;
  }

  AirSimServer& server_;
  Connection* const c_;
  const int fd_;
  msgpack::unpacker unpacker_;
  msgpack::sbuffer replies_;
  msgpack::sbuffer result_;
  msgpack::object_handle handle_;
  absl::Time partial_since_ = absl::InfiniteFuture();
  std::string close_reason_;
  bool error_ = false;
};

void AirSimServer::ServeConnection(Connection* c) { Session(*this, c).Run(); }

}  // namespace convoy::sim
