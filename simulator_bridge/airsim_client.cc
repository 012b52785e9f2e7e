#include "simulator_bridge/airsim_client.h"

#include <glog/logging.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace convoy {

using airsim::Packer;
using airsim::Read;
using airsim::Write;

namespace {

constexpr size_t kReadChunk = 64 * 1024;

absl::Status Prefixed(absl::string_view method, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat("airsim ", method, ": ", status.message()));
}

}  // namespace

absl::StatusOr<std::unique_ptr<AirSimClient>> AirSimClient::Connect(
    const AirSimClientOptions& options) {
  if (options.port <= 0 || options.port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("bad port ", options.port));
  }
  if (options.max_reconnect_attempts < 0) {
    return absl::InvalidArgumentError("max_reconnect_attempts < 0");
  }
  std::unique_ptr<AirSimClient> client(new AirSimClient(options));
  {
    absl::MutexLock lock(&client->mu_);
    if (absl::Status st = client->EnsureConnected(); !st.ok()) return st;
  }
  if (absl::Status st = client->ConfirmConnection(); !st.ok()) return st;
  if (options.enable_api_control) {
    if (absl::Status st = client->EnableApiControl(true); !st.ok()) return st;
  }
  return client;
}

AirSimClient::AirSimClient(const AirSimClientOptions& options)
    : options_(options), request_(4096), backoff_(options.backoff) {}

int64_t AirSimClient::connections() const {
  absl::MutexLock lock(&mu_);
  return connections_;
}

absl::Status AirSimClient::EnsureConnected() {
  if (fd_.valid()) return absl::OkStatus();
  absl::Status last;
  for (int attempt = 0; attempt <= options_.max_reconnect_attempts; ++attempt) {
    if (attempt > 0) absl::SleepFor(backoff_.NextDelay());
    absl::StatusOr<ScopedFd> fd =
        ConnectTcp(options_.host, options_.port, options_.connect_timeout);
    if (fd.ok()) {
      fd_ = *std::move(fd);
      const msgpack::unpack_limit limits(
          /*array=*/std::min<size_t>(options_.max_response_bytes / 4, size_t{1} << 24),
          /*map=*/1 << 16,
          /*str=*/options_.max_response_bytes, /*bin=*/options_.max_response_bytes, /*ext=*/0,
          /*depth=*/64);
      unpacker_ = std::make_unique<msgpack::unpacker>(nullptr, nullptr, kReadChunk, limits);
      ++connections_;
      backoff_.Reset();
      if (connections_ > 1)
        LOG(INFO) << "reconnected to AirSim at " << options_.host << ":" << options_.port;
      return absl::OkStatus();
    }
    last = fd.status();
    LOG_IF(WARNING, attempt < options_.max_reconnect_attempts)
        << "cannot reach AirSim at " << options_.host << ":" << options_.port << ": " << last
        << "; retrying";
  }
  return absl::UnavailableError(absl::StrCat("cannot connect to AirSim at ", options_.host, ":",
                                             options_.port, ": ", last.message()));
}

void AirSimClient::Disconnect() {
  fd_.reset();
  unpacker_.reset();
}

absl::StatusOr<msgpack::object_handle> AirSimClient::Call(
    absl::string_view method, uint32_t arg_count, const std::function<void(Packer&)>& pack_args) {
  absl::MutexLock lock(&mu_);
  if (absl::Status st = EnsureConnected(); !st.ok()) return Prefixed(method, st);
  const uint32_t msgid = next_msgid_++;
  request_.clear();
  Packer pk(request_);
  pk.pack_array(4);
  pk.pack_int(airsim::kRequest);
  pk.pack_uint32(msgid);
  Write(pk, method);
  pk.pack_array(arg_count);
  if (pack_args) pack_args(pk);
  const absl::Time deadline = absl::Now() + options_.call_timeout;
  if (absl::Status st = SendAll(fd_.get(), request_.data(), request_.size(), deadline); !st.ok()) {
    Disconnect();
    return Prefixed(method, absl::UnavailableError(st.message()));
  }
  msgpack::object_handle handle;
  while (true) {
    try {
      while (unpacker_->next(handle)) {
        const msgpack::object& m = handle.get();
        if (m.type != msgpack::type::ARRAY || m.via.array.size != 4 ||
            m.via.array.ptr[0].type != msgpack::type::POSITIVE_INTEGER ||
            m.via.array.ptr[0].via.u64 != airsim::kResponse) {
          Disconnect();
          return Prefixed(method, absl::DataLossError("the server sent a non-response message"));
        }
        uint32_t id;
        if (!Read(m.via.array.ptr[1], &id).ok()) {
          Disconnect();
          return Prefixed(method, absl::DataLossError("response id is not a uint32"));
        }
        if (id != msgid) continue;  // not ours (cannot happen on a serialised connection)
        const msgpack::object& error = m.via.array.ptr[2];
        if (error.type != msgpack::type::NIL) {
          std::string text;
          if (!Read(error, &text).ok()) {
            std::ostringstream os;
            os << error;
            text = os.str();
          }
          return absl::UnknownError(absl::StrCat("airsim ", method, ": ", text));
        }
        return msgpack::object_handle(m.via.array.ptr[3], std::move(handle.zone()));
      }
    } catch (const std::exception& e) {
      Disconnect();
      return Prefixed(method, absl::DataLossError(absl::StrCat("malformed response: ", e.what())));
    }
    if (unpacker_->message_size() > options_.max_response_bytes) {
      Disconnect();
      return Prefixed(method, absl::ResourceExhaustedError("response over max_response_bytes"));
    }
    if (absl::Status st = WaitReadable(fd_.get(), deadline); !st.ok()) {
      Disconnect();
      return Prefixed(method, st);
    }
    unpacker_->reserve_buffer(kReadChunk);
    const ssize_t n = ::recv(fd_.get(), unpacker_->buffer(), unpacker_->buffer_capacity(), 0);
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      const std::string why = n == 0 ? "connection closed by the server" : std::strerror(errno);
      Disconnect();
      return Prefixed(method, absl::UnavailableError(why));
    }
    unpacker_->buffer_consumed(static_cast<size_t>(n));
  }
}

template <typename T>
absl::StatusOr<T> AirSimClient::CallFor(absl::string_view method, uint32_t arg_count,
                                        const std::function<void(Packer&)>& pack_args) {
  absl::StatusOr<msgpack::object_handle> h = Call(method, arg_count, pack_args);
  if (!h.ok()) return h.status();
  T value{};
  if (absl::Status st = Read(h->get(), &value); !st.ok()) {
    return Prefixed(method,
                    absl::DataLossError(absl::StrCat("unexpected result type: ", st.message())));
  }
  return value;
}

absl::Status AirSimClient::CallVoid(absl::string_view method, uint32_t arg_count,
                                    const std::function<void(Packer&)>& pack_args) {
  return Call(method, arg_count, pack_args).status();
}

absl::Status AirSimClient::ConfirmConnection() {
  absl::StatusOr<bool> ping = Ping();
  if (!ping.ok()) return ping.status();
  if (!*ping) return absl::UnavailableError("airsim ping: the server answered false");
  absl::StatusOr<int32_t> server_version = CallFor<int32_t>("getServerVersion", 0, nullptr);
  if (!server_version.ok()) return server_version.status();
  absl::StatusOr<int32_t> min_client = CallFor<int32_t>("getMinRequiredClientVersion", 0, nullptr);
  if (!min_client.ok()) return min_client.status();
  if (*server_version < airsim::kProtocolVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "AirSim server is of older version and not supported by this client (server version ",
        *server_version, ", need ", airsim::kProtocolVersion, ")"));
  }
  if (airsim::kProtocolVersion < *min_client) {
    return absl::FailedPreconditionError(absl::StrCat(
        "AirSim client is of older version and not supported by this server (server needs ",
        *min_client, ", this client is ", airsim::kProtocolVersion, ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> AirSimClient::Ping() { return CallFor<bool>("ping", 0, nullptr); }

absl::Status AirSimClient::EnableApiControl(bool enable) {
  return CallVoid("enableApiControl", 2, [&](Packer& pk) {
    Write(pk, enable);
    Write(pk, options_.vehicle_name);
  });
}

absl::StatusOr<bool> AirSimClient::IsApiControlEnabled() {
  return CallFor<bool>("isApiControlEnabled", 1,
                       [&](Packer& pk) { Write(pk, options_.vehicle_name); });
}

absl::StatusOr<bool> AirSimClient::ArmDisarm(bool arm) {
  return CallFor<bool>("armDisarm", 2, [&](Packer& pk) {
    Write(pk, arm);
    Write(pk, options_.vehicle_name);
  });
}

absl::Status AirSimClient::Reset() { return CallVoid("reset", 0, nullptr); }

absl::StatusOr<Pose> AirSimClient::GetPose() {
  return CallFor<Pose>("simGetVehiclePose", 1,
                       [&](Packer& pk) { Write(pk, options_.vehicle_name); });
}

absl::Status AirSimClient::SetPose(const Pose& pose, bool ignore_collision) {
  return CallVoid("simSetVehiclePose", 3, [&](Packer& pk) {
    Write(pk, pose);
    Write(pk, ignore_collision);
    Write(pk, options_.vehicle_name);
  });
}

absl::Status AirSimClient::SetControls(const CarControls& controls) {
  return CallVoid("setCarControls", 2, [&](Packer& pk) {
    Write(pk, controls);
    Write(pk, options_.vehicle_name);
  });
}

absl::StatusOr<CarControls> AirSimClient::GetControls() {
  return CallFor<CarControls>("getCarControls", 1,
                              [&](Packer& pk) { Write(pk, options_.vehicle_name); });
}

absl::StatusOr<CarState> AirSimClient::GetState() {
  return CallFor<CarState>("getCarState", 1, [&](Packer& pk) { Write(pk, options_.vehicle_name); });
}

absl::StatusOr<CollisionInfo> AirSimClient::GetCollisionInfo() {
  return CallFor<CollisionInfo>("simGetCollisionInfo", 1,
                                [&](Packer& pk) { Write(pk, options_.vehicle_name); });
}

absl::StatusOr<KinematicsState> AirSimClient::GetGroundTruthKinematics() {
  return CallFor<KinematicsState>("simGetGroundTruthKinematics", 1,
                                  [&](Packer& pk) { Write(pk, options_.vehicle_name); });
}

absl::Status AirSimClient::GetImages(const std::vector<ImageRequest>& requests,
                                     std::vector<ImageResponse>* responses) {
  absl::StatusOr<msgpack::object_handle> h = Call("simGetImages", 3, [&](Packer& pk) {
    Write(pk, requests);
    Write(pk, options_.vehicle_name);
    Write(pk, false);
  });
  if (!h.ok()) return h.status();
  if (absl::Status st = Read(h->get(), responses); !st.ok()) {
    return Prefixed("simGetImages",
                    absl::DataLossError(absl::StrCat("bad ImageResponse: ", st.message())));
  }
  for (const ImageResponse& r : *responses) {
    if (r.width <= 0 || r.height <= 0 || r.compress || r.pixels_as_float) continue;
    const size_t pixels = static_cast<size_t>(r.width) * r.height;
    const size_t bytes = r.image_data_uint8.size();
    if (bytes != pixels * 3 && bytes != pixels * 4) {
      return Prefixed("simGetImages",
                      absl::DataLossError(absl::StrCat("image of ", r.width, "x", r.height, " has ",
                                                       bytes, " bytes, neither 3 nor 4 channels")));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<uint8_t>> AirSimClient::GetImagePng(const std::string& camera,
                                                               ImageType type) {
  return CallFor<std::vector<uint8_t>>("simGetImage", 4, [&](Packer& pk) {
    Write(pk, camera);
    Write(pk, type);
    Write(pk, options_.vehicle_name);
    Write(pk, false);
  });
}

absl::Status AirSimClient::Pause(bool paused) {
  return CallVoid("simPause", 1, [&](Packer& pk) { Write(pk, paused); });
}

absl::StatusOr<bool> AirSimClient::IsPaused() { return CallFor<bool>("simIsPaused", 0, nullptr); }

absl::Status AirSimClient::ContinueForTime(absl::Duration duration) {
  const double seconds = absl::ToDoubleSeconds(duration);
  if (!std::isfinite(seconds) || seconds < 0) {
    return absl::InvalidArgumentError("ContinueForTime: duration must be finite and >= 0");
  }
  if (absl::Status st = CallVoid("simContinueForTime", 1, [&](Packer& pk) { Write(pk, seconds); });
      !st.ok()) {
    return st;
  }
  // AirSim returns at once and pauses again when the time has run; convoy_sim returns when done.
  // Either way, the step is over once the server reports itself paused.
  const absl::Time deadline = absl::Now() + duration + options_.call_timeout;
  absl::Duration wait = absl::Microseconds(200);
  while (true) {
    absl::StatusOr<bool> paused = IsPaused();
    if (!paused.ok()) return paused.status();
    if (*paused) return absl::OkStatus();
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError("airsim simContinueForTime: the server never paused");
    }
    absl::SleepFor(wait);
    wait = std::min(wait * 2, absl::Milliseconds(10));
  }
}

absl::Status AirSimClient::ContinueForFrames(uint32_t frames) {
  return CallVoid("simContinueForFrames", 1, [&](Packer& pk) { Write(pk, frames); });
}

absl::StatusOr<std::vector<std::string>> AirSimClient::ListVehicles() {
  absl::StatusOr<msgpack::object_handle> h = Call("listVehicles", 0, nullptr);
  if (!h.ok()) return h.status();
  const msgpack::object& o = h->get();
  if (o.type != msgpack::type::ARRAY) {
    return Prefixed("listVehicles", absl::DataLossError("result is not an array"));
  }
  std::vector<std::string> names(o.via.array.size);
  for (uint32_t i = 0; i < o.via.array.size; ++i) {
    if (!Read(o.via.array.ptr[i], &names[i]).ok()) {
      return Prefixed("listVehicles", absl::DataLossError("a name is not a string"));
    }
  }
  return names;
}

}  // namespace convoy
