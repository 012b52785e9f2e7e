// AirSimClient: a CarSim over AirSim's msgpack-rpc protocol (AIRSIM_PROTOCOL.md), for AirSim 1.8,
// Colosseum before 2.3 and convoy_sim.
//
// - Connect() opens the TCP connection and starts a session on it: it confirms the connection the
//   way AirSim's confirmConnection does (ping, then server and minimum client versions against
//   protocol version 1) and enables API control for the vehicle unless told not to.
// - Every call has a deadline (call_timeout). A call that times out or hits a socket error drops
//   the connection; the next call reconnects, waiting with exponential backoff between attempts,
//   up to max_reconnect_attempts. A connection the server closed while the client was idle is
//   noticed before the next call is sent, so that call reconnects instead of failing. Calls are
//   never silently repeated: one that may have reached the server fails with UNAVAILABLE or
//   DEADLINE_EXCEEDED and the caller decides.
// - A reconnect restores the session, since a restarted AirSim starts with API control off and
//   its clock running: it confirms the connection again, then sets again what this client had set
//   on the server and the server acknowledged: API control (EnableApiControl, or Connect's
//   enable_api_control), arming (ArmDisarm) and the pause state (Pause; ContinueForTime,
//   ContinueForFrames and Advance leave the server paused). A session that cannot be restored
//   fails the call that reconnected, with the restoring call's error.
// - An error answered by the server becomes UNKNOWN with "airsim <method>: " and the server's own
//   error string.
// - Scene images may come with 3 (B, G, R) or 4 (AirSim < 1.3, RGBA) channels; both are accepted.
// - Round trips: Observe sends its three reads in one write (they are independent, so any server
//   may answer them in any order). With `pipeline` on, each session asks the server whether it
//   executes a connection's requests in order (convoy_sim's convoyServerInfo says so; AirSim has
//   no such method and makes no such promise); when it does, Advance sends setCarControls,
//   simContinueForTime, simIsPaused and the reads in one write: one round trip per control
//   period instead of six. Otherwise Advance waits for each call that must precede the next.
//
// Thread-safe (calls are serialised on one connection), though one client per thread is faster.
#ifndef CONVOY_SIMULATOR_BRIDGE_AIRSIM_AIRSIM_CLIENT_H_
#define CONVOY_SIMULATOR_BRIDGE_AIRSIM_AIRSIM_CLIENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <msgpack.hpp>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/support/backoff.h"
#include "simulator_bridge/airsim/airsim_codec.h"
#include "simulator_bridge/airsim/socket.h"
#include "simulator_bridge/world/car_sim.h"

namespace convoy::sim {

struct AirSimClientOptions {
  std::string host = "127.0.0.1";
  int port = 41451;
  std::string vehicle_name;  // "" is the server's default vehicle
  absl::Duration connect_timeout = absl::Seconds(5);
  absl::Duration call_timeout = absl::Seconds(30);
  int max_reconnect_attempts = 5;
  Backoff::Options backoff;
  bool enable_api_control = true;
  // Send a whole control period (Advance) in one write when the server executes requests in order.
  bool pipeline = true;
  size_t max_response_bytes = size_t{256} << 20;
};

class AirSimClient : public CarSim {
 public:
  static absl::StatusOr<std::unique_ptr<AirSimClient>> Connect(const AirSimClientOptions& options);

  // CarSim.
  absl::Status Reset() override;
  absl::StatusOr<Pose> GetPose() override;
  absl::Status SetPose(const Pose& pose, bool ignore_collision) override;
  absl::Status SetControls(const CarControls& controls) override;
  absl::StatusOr<CarControls> GetControls() override;
  absl::StatusOr<CarState> GetState() override;
  absl::StatusOr<CollisionInfo> GetCollisionInfo() override;
  absl::Status GetImages(const std::vector<ImageRequest>& requests,
                         std::vector<ImageResponse>* responses) override;
  absl::Status Pause(bool paused) override;
  absl::StatusOr<bool> IsPaused() override;
  absl::Status ContinueForTime(absl::Duration duration) override;
  absl::Status Observe(const std::vector<ImageRequest>& requests, SimObservation* out) override;
  absl::Status Advance(const CarControls& controls, absl::Duration duration,
                       const std::vector<ImageRequest>& requests, SimObservation* out) override;

  // The rest of the protocol page.
  absl::Status ConfirmConnection();
  absl::StatusOr<bool> Ping();
  absl::Status EnableApiControl(bool enable);
  absl::StatusOr<bool> IsApiControlEnabled();
  absl::StatusOr<bool> ArmDisarm(bool arm);
  absl::Status ContinueForFrames(uint32_t frames);
  absl::StatusOr<KinematicsState> GetGroundTruthKinematics();
  absl::StatusOr<std::vector<std::string>> ListVehicles();
  // simGetImage: PNG bytes, empty when the server has no such image.
  absl::StatusOr<std::vector<uint8_t>> GetImagePng(const std::string& camera, ImageType type);

  // One raw call: `pack_args` writes exactly `arg_count` values. The result object lives in the
  // returned handle.
  absl::StatusOr<msgpack::object_handle> Call(
      absl::string_view method, uint32_t arg_count,
      const std::function<void(airsim::Packer&)>& pack_args);

  const AirSimClientOptions& options() const { return options_; }
  // Connections made so far (1 after Connect, more after reconnects).
  int64_t connections() const;
  // Whether this session's server said it executes a connection's requests in order (so Advance
  // takes one round trip).
  bool server_answers_in_order() const;
  // Writes sent so far, each a request or a pipelined batch of requests: the round trips made.
  int64_t round_trips() const;

 private:
  // One request of a batch: written by Append, answered by Transact.
  struct Pending {
    absl::string_view method;
    uint32_t msgid = 0;
    bool answered = false;
    absl::Status error;  // the server's error answer, as UNKNOWN "airsim <method>: <its text>"
    msgpack::object_handle result;
  };
  using PackArgs = absl::FunctionRef<void(airsim::Packer&)>;

  explicit AirSimClient(const AirSimClientOptions& options);
  // Connects if there is no open connection, starting (on a reconnect: restoring) the session.
  absl::Status EnsureConnected() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status StartSession() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Disconnect() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // True when the server has closed the open connection (or broken it) while it was idle.
  bool PeerClosed() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // A batch: Begin, Append each request, then Transact sends them in one write and reads every
  // answer. Non-OK from Transact: the connection failed and was dropped; the status names the
  // first unanswered method. Each Pending then holds its own answer.
  void Begin() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Append(Pending* call, absl::string_view method, uint32_t arg_count, PackArgs pack_args)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Transact(Pending* calls, size_t count) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One call on the open connection.
  absl::StatusOr<msgpack::object_handle> CallLocked(absl::string_view method, uint32_t arg_count,
                                                    PackArgs pack_args)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One call, connecting first if needed.
  absl::StatusOr<msgpack::object_handle> CallConnected(absl::string_view method, uint32_t arg_count,
                                                       PackArgs pack_args)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  template <typename T>
  absl::StatusOr<T> CallFor(absl::string_view method, uint32_t arg_count, PackArgs pack_args);
  absl::Status CallVoid(absl::string_view method, uint32_t arg_count, PackArgs pack_args);

  absl::Status ConfirmConnectionLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status ContinueForTimeLocked(absl::Duration duration) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Polls simIsPaused until the server reports itself paused, or the deadline.
  absl::Status WaitPausedLocked(absl::Time deadline) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status ObserveLocked(const std::vector<ImageRequest>& requests, SimObservation* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AppendObserve(const std::vector<ImageRequest>& requests, Pending* calls)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status ReadObserve(const std::vector<ImageRequest>& requests, Pending* calls,
                           SimObservation* out);

  AirSimClientOptions options_;
  mutable absl::Mutex mu_;
  ScopedFd fd_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<msgpack::unpacker> unpacker_ ABSL_GUARDED_BY(mu_);
  msgpack::sbuffer request_ ABSL_GUARDED_BY(mu_);
  uint32_t next_msgid_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t connections_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t round_trips_ ABSL_GUARDED_BY(mu_) = 0;
  bool in_order_ ABSL_GUARDED_BY(mu_) = false;
  bool had_session_ ABSL_GUARDED_BY(mu_) = false;  // a later session is a restored one
  Backoff backoff_ ABSL_GUARDED_BY(mu_);
  // Session state the server acknowledged, set again on every new connection.
  std::optional<bool> api_control_ ABSL_GUARDED_BY(mu_);
  std::optional<bool> armed_ ABSL_GUARDED_BY(mu_);
  std::optional<bool> paused_ ABSL_GUARDED_BY(mu_);
};

}  // namespace convoy::sim

#endif  // CONVOY_SIMULATOR_BRIDGE_AIRSIM_AIRSIM_CLIENT_H_
