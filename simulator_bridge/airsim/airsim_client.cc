#include "simulator_bridge/airsim/airsim_client.h"

#include <glog/logging.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/support/status_macros.h"

namespace convoy::sim {

using airsim::Packer;
using airsim::Read;
using airsim::Write;

namespace {

// A 256x144 scene response (111 kB) fits in one read, and the buffer is rewound, not reallocated.
constexpr size_t kReadChunk = 256 * 1024;
constexpr size_t kInitialReadBuffer = 2 * kReadChunk;
// The server's answer to the capability probe: a map, "answers_in_order" true when it executes a
// connection's requests one at a time in arrival order (AirSim has no such method).
constexpr char kServerInfoMethod[] = "convoyServerInfo";

// Large bins (image bytes) stay in the read buffer instead of being copied into the result's zone;
// the buffer is reused once the result is dropped.
constexpr size_t kReferenceBinsFrom = 4096;

bool ReferenceLargeBins(msgpack::type::object_type type, size_t length, void*) {
  return type == msgpack::type::BIN && length >= kReferenceBinsFrom;
}

void NoArgs(Packer&) {}

absl::Status Prefixed(absl::string_view method, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat("airsim ", method, ": ", status.message()));
}

template <typename T>
absl::Status ReadResult(absl::string_view method, const msgpack::object& o, T* value) {
  if (absl::Status st = Read(o, value); !st.ok()) {
    return Prefixed(method,
                    absl::DataLossError(absl::StrCat("unexpected result type: ", st.message())));
  }
  return absl::OkStatus();
}

absl::Status ReadImages(const msgpack::object& o, std::vector<ImageResponse>* responses) {
  if (absl::Status st = Read(o, responses); !st.ok()) {
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

absl::Status CheckDuration(absl::string_view method, absl::Duration duration) {
  const double seconds = absl::ToDoubleSeconds(duration);
  if (!std::isfinite(seconds) || seconds < 0) {
    return absl::InvalidArgumentError(absl::StrCat(method, ": duration must be finite and >= 0"));
  }
  return absl::OkStatus();
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
  absl::MutexLock lock(&client->mu_);
  if (options.enable_api_control) client->api_control_ = true;
  CONVOY_RETURN_IF_ERROR(client->EnsureConnected());
  return client;
}

AirSimClient::AirSimClient(const AirSimClientOptions& options)
    : options_(options), request_(4096), backoff_(options.backoff) {}

int64_t AirSimClient::connections() const {
  absl::MutexLock lock(&mu_);
  return connections_;
}

bool AirSimClient::server_answers_in_order() const {
  absl::MutexLock lock(&mu_);
  return in_order_;
}

int64_t AirSimClient::round_trips() const {
  absl::MutexLock lock(&mu_);
  return round_trips_;
}

bool AirSimClient::PeerClosed() {
  pollfd p{fd_.get(), POLLIN, 0};
  if (::poll(&p, 1, 0) <= 0) return false;  // nothing pending: the usual case
  if ((p.revents & (POLLERR | POLLHUP | POLLNVAL)) != 0) return true;
  char byte;
  const ssize_t n = ::recv(fd_.get(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  // Unasked-for bytes stay: Transact skips answers that are not to its requests.
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

absl::Status AirSimClient::EnsureConnected() {
  if (fd_.valid()) {
    if (!PeerClosed()) return absl::OkStatus();
    LOG(INFO) << "AirSim at " << options_.host << ":" << options_.port
              << " closed the connection; reconnecting";
    Disconnect();
  }
  absl::Status last;
  for (int attempt = 0; attempt <= options_.max_reconnect_attempts; ++attempt) {
    if (attempt > 0) absl::SleepFor(backoff_.NextDelay());
    absl::StatusOr<ScopedFd> fd =
        ConnectTcp(options_.host, options_.port, options_.connect_timeout);
    if (!fd.ok()) {
      last = fd.status();
      LOG_IF(WARNING, attempt < options_.max_reconnect_attempts)
          << "cannot reach AirSim at " << options_.host << ":" << options_.port << ": " << last
          << "; retrying";
      continue;
    }
    fd_ = *std::move(fd);
    const msgpack::unpack_limit limits(
        /*array=*/std::min<size_t>(options_.max_response_bytes / 4, size_t{1} << 24),
        /*map=*/1 << 16,
        /*str=*/options_.max_response_bytes, /*bin=*/options_.max_response_bytes, /*ext=*/0,
        /*depth=*/64);
    unpacker_ = std::make_unique<msgpack::unpacker>(&ReferenceLargeBins, nullptr,
                                                    kInitialReadBuffer, limits);
    ++connections_;
    absl::Status session = StartSession();
    if (session.ok()) {
      backoff_.Reset();
      LOG_IF(INFO, had_session_) << "reconnected to AirSim at " << options_.host << ":"
                                 << options_.port << " and restored the session";
      had_session_ = true;
      return absl::OkStatus();
    }
    Disconnect();
    // A server that answered but refused the session will refuse it again.
    if (!absl::IsUnavailable(session) && !absl::IsDeadlineExceeded(session)) return session;
    last = session;
    LOG_IF(WARNING, attempt < options_.max_reconnect_attempts)
        << "AirSim at " << options_.host << ":" << options_.port
        << " dropped the new connection: " << last << "; retrying";
  }
  return absl::UnavailableError(absl::StrCat("cannot connect to AirSim at ", options_.host, ":",
                                             options_.port, ": ", last.message()));
}

absl::Status AirSimClient::StartSession() {
  CONVOY_RETURN_IF_ERROR(ConfirmConnectionLocked());
  in_order_ = false;
  if (options_.pipeline) {
    // AirSim answers "could not find function": not in order, as far as this client knows.
    absl::StatusOr<msgpack::object_handle> info = CallLocked(kServerInfoMethod, 0, NoArgs);
    if (!info.ok() && !absl::IsUnknown(info.status())) return info.status();
    if (info.ok() && info->get().type == msgpack::type::MAP) {
      const msgpack::object_map& map = info->get().via.map;
      for (uint32_t i = 0; i < map.size; ++i) {
        std::string key;
        bool value = false;
        if (Read(map.ptr[i].key, &key).ok() && key == "answers_in_order" &&
            Read(map.ptr[i].val, &value).ok()) {
          in_order_ = value;
        }
      }
    }
  }
  // The session state, in one write: these calls do not depend on one another.
  Pending calls[3];
  size_t count = 0;
  Begin();
  if (api_control_.has_value()) {
    const bool enable = *api_control_;
    Append(&calls[count++], "enableApiControl", 2, [&](Packer& pk) {
      Write(pk, enable);
      Write(pk, options_.vehicle_name);
    });
  }
  if (armed_.has_value()) {
    const bool arm = *armed_;
    Append(&calls[count++], "armDisarm", 2, [&](Packer& pk) {
      Write(pk, arm);
      Write(pk, options_.vehicle_name);
    });
  }
  if (paused_.has_value()) {
    const bool pause = *paused_;
    Append(&calls[count++], "simPause", 1, [&](Packer& pk) { Write(pk, pause); });
  }
  if (count == 0) return absl::OkStatus();
  CONVOY_RETURN_IF_ERROR(Transact(calls, count));
  for (size_t i = 0; i < count; ++i) {
    if (calls[i].error.ok()) continue;
    if (!had_session_) return calls[i].error;
    return absl::Status(calls[i].error.code(),
                        absl::StrCat("restoring the session: ", calls[i].error.message()));
  }
  return absl::OkStatus();
}

void AirSimClient::Disconnect() {
  fd_.reset();
  unpacker_.reset();
}

void AirSimClient::Begin() { request_.clear(); }

void AirSimClient::Append(Pending* call, absl::string_view method, uint32_t arg_count,
                          PackArgs pack_args) {
  call->method = method;
  call->msgid = next_msgid_++;
  call->answered = false;
  call->error = absl::OkStatus();
  Packer pk(request_);
  pk.pack_array(4);
  pk.pack_int(airsim::kRequest);
  pk.pack_uint32(call->msgid);
  Write(pk, method);
  pk.pack_array(arg_count);
  pack_args(pk);
}

absl::Status AirSimClient::Transact(Pending* calls, size_t count) {
  size_t left = count;
  auto fail = [&](const absl::Status& status) {
    mu_.AssertHeld();  // Transact's lock: the analysis does not carry it into a lambda.
    Disconnect();
    absl::string_view method = calls[0].method;
    for (size_t i = 0; i < count; ++i) {
      if (!calls[i].answered) {
        method = calls[i].method;
        break;
      }
    }
    return Prefixed(method, status);
  };
  const absl::Time deadline = absl::Now() + options_.call_timeout;
  ++round_trips_;
  if (absl::Status st = SendAll(fd_.get(), request_.data(), request_.size(), deadline); !st.ok()) {
    return fail(absl::UnavailableError(st.message()));
  }
  msgpack::object_handle handle;
  while (left > 0) {
    try {
      while (left > 0 && unpacker_->next(handle)) {
        const msgpack::object& m = handle.get();
        if (m.type != msgpack::type::ARRAY || m.via.array.size != 4 ||
            m.via.array.ptr[0].type != msgpack::type::POSITIVE_INTEGER ||
            m.via.array.ptr[0].via.u64 != airsim::kResponse) {
          return fail(absl::DataLossError("the server sent a non-response message"));
        }
        uint32_t id;
        if (!Read(m.via.array.ptr[1], &id).ok()) {
          return fail(absl::DataLossError("response id is not a uint32"));
        }
        Pending* call = nullptr;
        for (size_t i = 0; i < count; ++i) {
          if (calls[i].msgid == id && !calls[i].answered) call = &calls[i];
        }
        if (call == nullptr) continue;  // not to this batch: cannot happen on one serial connection
        const msgpack::object& error = m.via.array.ptr[2];
        if (error.type != msgpack::type::NIL) {
          std::string text;
          if (!Read(error, &text).ok()) {
            std::ostringstream os;
            os << error;
            text = os.str();
          }
          call->error = absl::UnknownError(absl::StrCat("airsim ", call->method, ": ", text));
        } else {
          call->result = msgpack::object_handle(m.via.array.ptr[3], std::move(handle.zone()));
        }
        call->answered = true;
        --left;
      }
    } catch (const std::exception& e) {
      return fail(absl::DataLossError(absl::StrCat("malformed response: ", e.what())));
    }
    if (left == 0) break;
    if (unpacker_->message_size() > options_.max_response_bytes) {
      return fail(absl::ResourceExhaustedError("response over max_response_bytes"));
    }
    if (absl::Status st = WaitReadable(fd_.get(), deadline); !st.ok()) return fail(st);
    unpacker_->reserve_buffer(kReadChunk);
    const ssize_t n = ::recv(fd_.get(), unpacker_->buffer(), unpacker_->buffer_capacity(), 0);
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      const std::string why = n == 0 ? "connection closed by the server" : std::strerror(errno);
      return fail(absl::UnavailableError(why));
    }
    unpacker_->buffer_consumed(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

absl::StatusOr<msgpack::object_handle> AirSimClient::CallLocked(absl::string_view method,
                                                                uint32_t arg_count,
                                                                PackArgs pack_args) {
  Pending call;
  Begin();
  Append(&call, method, arg_count, pack_args);
  CONVOY_RETURN_IF_ERROR(Transact(&call, 1));
  if (!call.error.ok()) return call.error;
  return std::move(call.result);
}

absl::StatusOr<msgpack::object_handle> AirSimClient::CallConnected(absl::string_view method,
                                                                   uint32_t arg_count,
                                                                   PackArgs pack_args) {
  if (absl::Status st = EnsureConnected(); !st.ok()) return Prefixed(method, st);
  return CallLocked(method, arg_count, pack_args);
}

absl::StatusOr<msgpack::object_handle> AirSimClient::Call(
    absl::string_view method, uint32_t arg_count, const std::function<void(Packer&)>& pack_args) {
  absl::MutexLock lock(&mu_);
  return CallConnected(method, arg_count, [&](Packer& pk) {
    if (pack_args) pack_args(pk);
  });
}

template <typename T>
absl::StatusOr<T> AirSimClient::CallFor(absl::string_view method, uint32_t arg_count,
                                        PackArgs pack_args) {
  absl::StatusOr<msgpack::object_handle> h;
  {
    absl::MutexLock lock(&mu_);
    h = CallConnected(method, arg_count, pack_args);
  }
  if (!h.ok()) return h.status();
  T value{};
  CONVOY_RETURN_IF_ERROR(ReadResult(method, h->get(), &value));
  return value;
}

absl::Status AirSimClient::CallVoid(absl::string_view method, uint32_t arg_count,
                                    PackArgs pack_args) {
  absl::MutexLock lock(&mu_);
  return CallConnected(method, arg_count, pack_args).status();
}

absl::Status AirSimClient::ConfirmConnection() {
  absl::MutexLock lock(&mu_);
  if (absl::Status st = EnsureConnected(); !st.ok()) return Prefixed("ping", st);
  return ConfirmConnectionLocked();
}

absl::Status AirSimClient::ConfirmConnectionLocked() {
  // AirSim's confirmConnection makes these three calls; they do not depend on one another.
  Pending calls[3];
  Begin();
  Append(&calls[0], "ping", 0, NoArgs);
  Append(&calls[1], "getServerVersion", 0, NoArgs);
  Append(&calls[2], "getMinRequiredClientVersion", 0, NoArgs);
  CONVOY_RETURN_IF_ERROR(Transact(calls, 3));
  bool ping = false;
  int32_t server_version = 0, min_client = 0;
  for (Pending& call : calls) {
    if (!call.error.ok()) return call.error;
  }
  CONVOY_RETURN_IF_ERROR(ReadResult("ping", calls[0].result.get(), &ping));
  if (!ping) return absl::UnavailableError("airsim ping: the server answered false");
  CONVOY_RETURN_IF_ERROR(ReadResult("getServerVersion", calls[1].result.get(), &server_version));
  CONVOY_RETURN_IF_ERROR(
      ReadResult("getMinRequiredClientVersion", calls[2].result.get(), &min_client));
  if (server_version < airsim::kProtocolVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "AirSim server is of older version and not supported by this client (server version ",
        server_version, ", need ", airsim::kProtocolVersion, ")"));
  }
  if (airsim::kProtocolVersion < min_client) {
    return absl::FailedPreconditionError(absl::StrCat(
        "AirSim client is of older version and not supported by this server (server needs ",
        min_client, ", this client is ", airsim::kProtocolVersion, ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> AirSimClient::Ping() { return CallFor<bool>("ping", 0, NoArgs); }

absl::Status AirSimClient::EnableApiControl(bool enable) {
  absl::MutexLock lock(&mu_);
  absl::Status st = CallConnected("enableApiControl", 2, [&](Packer& pk) {
                      Write(pk, enable);
                      Write(pk, options_.vehicle_name);
                    }).status();
  if (st.ok()) api_control_ = enable;
  return st;
}

absl::StatusOr<bool> AirSimClient::IsApiControlEnabled() {
  return CallFor<bool>("isApiControlEnabled", 1,
                       [&](Packer& pk) { Write(pk, options_.vehicle_name); });
}

absl::StatusOr<bool> AirSimClient::ArmDisarm(bool arm) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<msgpack::object_handle> h = CallConnected("armDisarm", 2, [&](Packer& pk) {
    Write(pk, arm);
    Write(pk, options_.vehicle_name);
  });
  if (!h.ok()) return h.status();
  armed_ = arm;
  bool result = false;
  CONVOY_RETURN_IF_ERROR(ReadResult("armDisarm", h->get(), &result));
  return result;
}

absl::Status AirSimClient::Reset() { return CallVoid("reset", 0, NoArgs); }

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
  absl::StatusOr<msgpack::object_handle> h;
  {
    absl::MutexLock lock(&mu_);
    h = CallConnected("simGetImages", 3, [&](Packer& pk) {
      Write(pk, requests);
      Write(pk, options_.vehicle_name);
      Write(pk, false);
    });
  }
  if (!h.ok()) return h.status();
  return ReadImages(h->get(), responses);
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
  absl::MutexLock lock(&mu_);
  absl::Status st = CallConnected("simPause", 1, [&](Packer& pk) { Write(pk, paused); }).status();
  if (st.ok()) paused_ = paused;
  return st;
}

absl::StatusOr<bool> AirSimClient::IsPaused() { return CallFor<bool>("simIsPaused", 0, NoArgs); }

absl::Status AirSimClient::ContinueForTime(absl::Duration duration) {
  CONVOY_RETURN_IF_ERROR(CheckDuration("ContinueForTime", duration));
  absl::MutexLock lock(&mu_);
  if (absl::Status st = EnsureConnected(); !st.ok()) return Prefixed("simContinueForTime", st);
  return ContinueForTimeLocked(duration);
}

absl::Status AirSimClient::ContinueForTimeLocked(absl::Duration duration) {
  const double seconds = absl::ToDoubleSeconds(duration);
  if (absl::Status st =
          CallLocked("simContinueForTime", 1, [&](Packer& pk) { Write(pk, seconds); }).status();
      !st.ok()) {
    return st;
  }
  // The server pauses once the time has run (or has already: convoy_sim returns when done).
  paused_ = true;
  return WaitPausedLocked(absl::Now() + duration + options_.call_timeout);
}

absl::Status AirSimClient::WaitPausedLocked(absl::Time deadline) {
  // AirSim returns at once and pauses again when the time has run; convoy_sim returns when done.
  // Either way, the step is over once the server reports itself paused.
  absl::Duration wait = absl::Microseconds(200);
  while (true) {
    CONVOY_ASSIGN_OR_RETURN(msgpack::object_handle h, CallLocked("simIsPaused", 0, NoArgs));
    bool paused = false;
    CONVOY_RETURN_IF_ERROR(ReadResult("simIsPaused", h.get(), &paused));
    if (paused) return absl::OkStatus();
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError("airsim simContinueForTime: the server never paused");
    }
    absl::SleepFor(wait);
    wait = std::min(wait * 2, absl::Milliseconds(10));
  }
}

absl::Status AirSimClient::ContinueForFrames(uint32_t frames) {
  absl::MutexLock lock(&mu_);
  absl::Status st =
      CallConnected("simContinueForFrames", 1, [&](Packer& pk) { Write(pk, frames); }).status();
  if (st.ok()) paused_ = true;  // the server pauses again after the frames
  return st;
}

void AirSimClient::AppendObserve(const std::vector<ImageRequest>& requests, Pending* calls) {
  Append(&calls[0], "getCarState", 1, [&](Packer& pk) { Write(pk, options_.vehicle_name); });
  Append(&calls[1], "simGetCollisionInfo", 1,
         [&](Packer& pk) { Write(pk, options_.vehicle_name); });
  if (requests.empty()) return;
  Append(&calls[2], "simGetImages", 3, [&](Packer& pk) {
    Write(pk, requests);
    Write(pk, options_.vehicle_name);
    Write(pk, false);
  });
}

absl::Status AirSimClient::ReadObserve(const std::vector<ImageRequest>& requests, Pending* calls,
                                       SimObservation* out) {
  const size_t count = requests.empty() ? 2 : 3;
  for (size_t i = 0; i < count; ++i) {
    if (!calls[i].error.ok()) return calls[i].error;
  }
  // Read fills the fields the server sent: start from the defaults, as a fresh read would.
  out->state = CarState{};
  CONVOY_RETURN_IF_ERROR(ReadResult("getCarState", calls[0].result.get(), &out->state));
  out->collision = CollisionInfo{};
  CONVOY_RETURN_IF_ERROR(ReadResult("simGetCollisionInfo", calls[1].result.get(), &out->collision));
  if (requests.empty()) {
    out->images.clear();
    return absl::OkStatus();
  }
  return ReadImages(calls[2].result.get(), &out->images);
}

absl::Status AirSimClient::ObserveLocked(const std::vector<ImageRequest>& requests,
                                         SimObservation* out) {
  Pending calls[3];
  Begin();
  AppendObserve(requests, calls);
  CONVOY_RETURN_IF_ERROR(Transact(calls, requests.empty() ? 2 : 3));
  return ReadObserve(requests, calls, out);
}

absl::Status AirSimClient::Observe(const std::vector<ImageRequest>& requests, SimObservation* out) {
  absl::MutexLock lock(&mu_);
  if (absl::Status st = EnsureConnected(); !st.ok()) return Prefixed("getCarState", st);
  return ObserveLocked(requests, out);
}

absl::Status AirSimClient::Advance(const CarControls& controls, absl::Duration duration,
                                   const std::vector<ImageRequest>& requests, SimObservation* out) {
  CONVOY_RETURN_IF_ERROR(CheckDuration("Advance", duration));
  absl::MutexLock lock(&mu_);
  if (absl::Status st = EnsureConnected(); !st.ok()) return Prefixed("setCarControls", st);
  auto set_controls = [&](Packer& pk) {
    Write(pk, controls);
    Write(pk, options_.vehicle_name);
  };
  const double seconds = absl::ToDoubleSeconds(duration);
  if (!in_order_) {
    // Each call must be done before the next starts: a server may run pipelined calls at once.
    CONVOY_RETURN_IF_ERROR(CallLocked("setCarControls", 2, set_controls).status());
    CONVOY_RETURN_IF_ERROR(ContinueForTimeLocked(duration));
    return ObserveLocked(requests, out);
  }
  // The server executes these one after another: the reads see the car after the period.
  Pending calls[6];
  Begin();
  Append(&calls[0], "setCarControls", 2, set_controls);
  Append(&calls[1], "simContinueForTime", 1, [&](Packer& pk) { Write(pk, seconds); });
  Append(&calls[2], "simIsPaused", 0, NoArgs);
  AppendObserve(requests, &calls[3]);
  CONVOY_RETURN_IF_ERROR(Transact(calls, requests.empty() ? 5 : 6));
  for (int i = 0; i < 3; ++i) {
    if (!calls[i].error.ok()) return calls[i].error;
  }
  paused_ = true;
  bool paused = false;
  CONVOY_RETURN_IF_ERROR(ReadResult("simIsPaused", calls[2].result.get(), &paused));
  CONVOY_RETURN_IF_ERROR(ReadObserve(requests, &calls[3], out));
  if (paused) return absl::OkStatus();
  // The server went on running after simContinueForTime returned: those reads came too early.
  // Wait for the pause and read again, keeping a collision the early read took.
  CONVOY_RETURN_IF_ERROR(WaitPausedLocked(absl::Now() + duration + options_.call_timeout));
  const CollisionInfo early = out->collision;
  CONVOY_RETURN_IF_ERROR(ObserveLocked(requests, out));
  if (early.has_collided && !out->collision.has_collided) out->collision = early;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> AirSimClient::ListVehicles() {
  absl::StatusOr<msgpack::object_handle> h;
  {
    absl::MutexLock lock(&mu_);
    h = CallConnected("listVehicles", 0, NoArgs);
  }
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

}  // namespace convoy::sim
