// AirSimClient: a CarSim over AirSim's msgpack-rpc protocol (AIRSIM_PROTOCOL.md), for AirSim 1.8,
// Colosseum before 2.3 and convoy_sim.
//
// - Connect() opens the TCP connection and confirms it the way AirSim's confirmConnection does
//   (ping, then server and minimum client versions against protocol version 1), then enables API
//   control for the vehicle unless told not to.
// - Every call has a deadline (call_timeout). A call that times out or hits a socket error drops
// the
//   connection; the next call reconnects, waiting with exponential backoff between attempts, up to
//   max_reconnect_attempts. Calls are never silently repeated: one that may have reached the
//   server fails with UNAVAILABLE or DEADLINE_EXCEEDED and the caller decides.
// - An error answered by the server becomes UNKNOWN with "airsim <method>: " and the server's own
//   error string.
// - Scene images may come with 3 (B, G, R) or 4 (AirSim < 1.3, RGBA) channels; both are accepted.
//
// Thread-safe (calls are serialised on one connection), though one client per thread is faster.
#ifndef CONVOY_SIMULATOR_BRIDGE_AIRSIM_CLIENT_H_
#define CONVOY_SIMULATOR_BRIDGE_AIRSIM_CLIENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <msgpack.hpp>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/backoff.h"
#include "simulator_bridge/airsim_codec.h"
#include "simulator_bridge/car_sim.h"
#include "simulator_bridge/socket.h"

namespace convoy {

struct AirSimClientOptions {
  std::string host = "127.0.0.1";
  int port = 41451;
  std::string vehicle_name;  // "" is the server's default vehicle
  absl::Duration connect_timeout = absl::Seconds(5);
  absl::Duration call_timeout = absl::Seconds(30);
  int max_reconnect_attempts = 5;
  Backoff::Options backoff;
  bool enable_api_control = true;
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

 private:
  explicit AirSimClient(const AirSimClientOptions& options);
  absl::Status EnsureConnected() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Disconnect() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  template <typename T>
  absl::StatusOr<T> CallFor(absl::string_view method, uint32_t arg_count,
                            const std::function<void(airsim::Packer&)>& pack_args);
  absl::Status CallVoid(absl::string_view method, uint32_t arg_count,
                        const std::function<void(airsim::Packer&)>& pack_args);

  AirSimClientOptions options_;
  mutable absl::Mutex mu_;
  ScopedFd fd_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<msgpack::unpacker> unpacker_ ABSL_GUARDED_BY(mu_);
  msgpack::sbuffer request_ ABSL_GUARDED_BY(mu_);
  uint32_t next_msgid_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t connections_ ABSL_GUARDED_BY(mu_) = 0;
  Backoff backoff_ ABSL_GUARDED_BY(mu_);
};

}  // namespace convoy

#endif  // CONVOY_SIMULATOR_BRIDGE_AIRSIM_CLIENT_H_
