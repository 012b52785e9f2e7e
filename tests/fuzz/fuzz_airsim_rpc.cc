// Fuzzes convoy_sim's AirSim endpoint: msgpack-rpc framing, method dispatch, argument decoding and
// the struct codec.
//
// AirSimServer reads its requests only from accepted sockets (its framing and dispatch live in
// ServeConnection), so each input goes to one real server, started once on 127.0.0.1 in lock-step
// mode, over a fresh TCP connection: the input is sent as the connection's whole byte stream, the
// write side is shut, and every response is read until the server closes. Separately, every msgpack
// object in the input (and each argument of a request) is decoded as each AirSim struct by the
// codec directly.
//
// Invariants checked, beyond the sanitizers':
// - every response is [1, msgid, error, result], error nil or a string (and then result nil);
// - the responses answer, in order, exactly the requests before the first message the protocol says
//   closes the connection (AirSimServer's header): not an array of 3 or 4, a wrong type field, a
//   msgid that is not a uint32, a method that is not a string or params that are not an array;
// - the codec is stable: a struct read and written once reads back and writes the same bytes again.
#include <glog/logging.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "simulator_bridge/airsim/airsim_codec.h"
#include "simulator_bridge/airsim/airsim_server.h"
#include "simulator_bridge/airsim/socket.h"
#include "simulator_bridge/world/road_map.h"
#include "simulator_bridge/world/world.h"
#include "tests/fuzz/fuzz_invariant.h"

namespace convoy {
namespace {

constexpr size_t kMaxMessageBytes = size_t{1} << 20;
// A whole exchange, including up to a million physics steps that simContinueForFrames may ask for.
constexpr absl::Duration kExchangeTimeout = absl::Seconds(120);

using fuzz::Check;

// The server's own unpack limits, so that this side frames the input as the server does.
msgpack::unpack_limit ServerLimits() {
  return msgpack::unpack_limit(/*array=*/1 << 16, /*map=*/1 << 12, /*str=*/kMaxMessageBytes,
                               /*bin=*/kMaxMessageBytes, /*ext=*/0, /*depth=*/32);
}

sim::AirSimServer& Server() {
  static sim::AirSimServer* server = [] {
    absl::StatusOr<sim::RoadMap> map =
        sim::RoadMap::Load(std::string(CONVOY_SOURCE_DIR) + "/simulator_bridge/maps/neighborhood");
    Check(map.ok(), "cannot load the neighborhood map");
    absl::StatusOr<std::shared_ptr<const sim::World>> world = sim::World::Create(*std::move(map));
    Check(world.ok(), "cannot build the world");
    sim::AirSimServerOptions options;
    options.sim.world = *world;
    options.sim.camera.width = 32;  // rendering is not what is fuzzed here; keep it cheap
    options.sim.camera.height = 18;
    options.vehicle_names = {"PhysXCar", "Car2"};
    options.port = 0;
    options.clock = sim::SimClockMode::kLockStep;
    options.max_connections = 1024;
    options.max_message_bytes = kMaxMessageBytes;
    absl::StatusOr<std::unique_ptr<sim::AirSimServer>> started = sim::AirSimServer::Start(options);
    Check(started.ok(), "cannot start the AirSim server");
    return started->release();  // lives as long as the fuzzer
  }();
  return *server;
}

// The msgids the server must answer, in order: requests up to the first message that closes the
// connection.
std::vector<uint32_t> ExpectedAnswers(const std::vector<msgpack::object_handle>& messages) {
  std::vector<uint32_t> ids;
  for (const msgpack::object_handle& h : messages) {
    const msgpack::object& m = h.get();
    if (m.type != msgpack::type::ARRAY || (m.via.array.size != 3 && m.via.array.size != 4)) break;
    const msgpack::object* f = m.via.array.ptr;
    const bool is_call = m.via.array.size == 4;
    if (f[0].type != msgpack::type::POSITIVE_INTEGER ||
        f[0].via.u64 !=
            static_cast<uint64_t>(is_call ? sim::airsim::kRequest : sim::airsim::kNotification)) {
      break;
    }
    uint32_t msgid = 0;
    if (is_call && !sim::airsim::Read(f[1], &msgid).ok()) break;
    std::string method;
    if (!sim::airsim::Read(f[is_call ? 2 : 1], &method).ok() ||
        f[is_call ? 3 : 2].type != msgpack::type::ARRAY) {
      break;
    }
    if (is_call) ids.push_back(msgid);
  }
  return ids;
}

// Sends `input` on a new connection, then reads until the server closes. The bytes received, and
// whether the connection ended with an orderly close (not a reset, not the timeout).
std::string Exchange(const uint8_t* data, size_t size, bool* orderly) {
  absl::StatusOr<sim::ScopedFd> fd =
      sim::ConnectTcp("127.0.0.1", Server().port(), absl::Seconds(10));
  Check(fd.ok(), "cannot connect to the AirSim server");
  const absl::Time deadline = absl::Now() + kExchangeTimeout;
  std::string received;
  size_t sent = 0;
  bool write_open = true;
  *orderly = false;
  char buffer[64 * 1024];
  while (absl::Now() < deadline) {
    if (write_open && sent == size) {
      ::shutdown(fd->get(), SHUT_WR);
      write_open = false;
    }
    pollfd p{fd->get(), static_cast<short>(POLLIN | (write_open ? POLLOUT : 0)), 0};
    if (::poll(&p, 1, 100) < 0 && errno != EINTR) break;
    if (write_open && (p.revents & (POLLOUT | POLLERR | POLLHUP))) {
      const ssize_t n = ::send(fd->get(), data + sent, size - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        sent += static_cast<size_t>(n);
      } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
        write_open = false;  // the server closed early; its answers may still be readable
      }
    }
    if (p.revents & (POLLIN | POLLERR | POLLHUP)) {
      const ssize_t n = ::recv(fd->get(), buffer, sizeof(buffer), MSG_DONTWAIT);
      if (n > 0) {
        received.append(buffer, static_cast<size_t>(n));
      } else if (n == 0) {
        *orderly = true;
        break;
      } else if (errno != EAGAIN && errno != EINTR) {
        break;
      }
    }
  }
  Check(absl::Now() < deadline, "the server neither answered nor closed the connection in time");
  return received;
}

void CheckResponses(const std::string& bytes, const std::vector<uint32_t>& expected, bool orderly) {
  msgpack::unpacker unpacker;
  unpacker.reserve_buffer(bytes.size());
  std::memcpy(unpacker.buffer(), bytes.data(), bytes.size());
  unpacker.buffer_consumed(bytes.size());
  std::vector<uint32_t> answered;
  msgpack::object_handle h;
  while (unpacker.next(h)) {
    const msgpack::object& m = h.get();
    Check(m.type == msgpack::type::ARRAY && m.via.array.size == 4,
          "a response is not an array of 4");
    const msgpack::object* f = m.via.array.ptr;
    Check(f[0].type == msgpack::type::POSITIVE_INTEGER && f[0].via.u64 == sim::airsim::kResponse,
          "a response's type field is not 1");
    uint32_t msgid = 0;
    Check(sim::airsim::Read(f[1], &msgid).ok(), "a response's msgid is not a uint32");
    Check(f[2].type == msgpack::type::NIL || f[2].type == msgpack::type::STR,
          "a response's error is neither nil nor a string");
    if (f[2].type == msgpack::type::STR) {
      Check(f[3].type == msgpack::type::NIL, "an error response carries a result");
    }
    answered.push_back(msgid);
  }
  Check(unpacker.nonparsed_size() == 0 || !orderly, "an orderly close cut a response short");
  Check(answered.size() <= expected.size(), "more responses than requests");
  for (size_t i = 0; i < answered.size(); ++i) {
    Check(answered[i] == expected[i], "responses out of order or for no request");
  }
  if (orderly) Check(answered.size() == expected.size(), "a request went unanswered");
}

template <typename T>
std::string Encode(const T& value) {
  msgpack::sbuffer buffer;
  sim::airsim::Packer pk(buffer);
  sim::airsim::Write(pk, value);
  return std::string(buffer.data(), buffer.size());
}

// Read, write, read back, write again: both writes must agree.
template <typename T>
void CheckCodec(const msgpack::object& o) {
  T first;
  if (!sim::airsim::Read(o, &first).ok()) return;
  const std::string bytes = Encode(first);
  msgpack::object_handle h = msgpack::unpack(bytes.data(), bytes.size());
  T second;
  Check(sim::airsim::Read(h.get(), &second).ok(), "a written struct does not read back");
  Check(Encode(second) == bytes, "a struct reads back to different bytes");
}

void CheckCodecAll(const msgpack::object& o) {
  CheckCodec<sim::CarControls>(o);
  CheckCodec<sim::CarState>(o);
  CheckCodec<sim::CollisionInfo>(o);
  CheckCodec<sim::Pose>(o);
  CheckCodec<sim::KinematicsState>(o);
  CheckCodec<sim::ImageResponse>(o);
  CheckCodec<std::vector<sim::ImageRequest>>(o);
}

void RunOne(const uint8_t* data, size_t size) {
  std::vector<msgpack::object_handle> messages;
  {
    msgpack::unpacker unpacker(nullptr, nullptr, MSGPACK_UNPACKER_INIT_BUFFER_SIZE, ServerLimits());
    unpacker.reserve_buffer(size);
    std::memcpy(unpacker.buffer(), data, size);
    unpacker.buffer_consumed(size);
    try {
      msgpack::object_handle h;
      while (unpacker.next(h)) messages.push_back(std::move(h));
    } catch (const std::exception&) {
      // Malformed or over a limit: the server closes the connection at the same point.
    }
  }
  for (const msgpack::object_handle& h : messages) {
    const msgpack::object& m = h.get();
    CheckCodecAll(m);
    if (m.type != msgpack::type::ARRAY) continue;
    for (uint32_t i = 0; i < m.via.array.size; ++i) {
      const msgpack::object& field = m.via.array.ptr[i];
      if (field.type != msgpack::type::ARRAY) continue;
      for (uint32_t j = 0; j < field.via.array.size; ++j) CheckCodecAll(field.via.array.ptr[j]);
    }
  }

  bool orderly = false;
  const std::string responses = Exchange(data, size, &orderly);
  CheckResponses(responses, ExpectedAnswers(messages), orderly);
}

}  // namespace
}  // namespace convoy

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  FLAGS_minloglevel = google::GLOG_FATAL;  // the server logs every connection it closes for errors
  convoy::Server();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  convoy::RunOne(data, size);
  return 0;
}
