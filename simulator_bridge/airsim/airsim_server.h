// AirSimServer: EmbeddedSim cars served over the AirSim msgpack-rpc protocol (AIRSIM_PROTOCOL.md),
// so AirSim's own clients (its Python package, rpclib C++ clients) and AirSimClient drive them
// unchanged. This is the core of the convoy_sim binary.
//
// Clock: kRealTime advances every car one physics step per step_seconds of wall-clock time unless
// paused (simPause), as AirSim does; kLockStep never advances on its own: time moves only on
// simContinueForTime / simContinueForFrames, which advance synchronously and return once done, so a
// client that drives lock-step sees exactly what an in-process EmbeddedSim would.
//
// Connections: each has its own thread; requests on one connection are answered in order
// (pipelining allowed). A connection is closed, with a logged reason, on malformed msgpack, a
// message that is not a msgpack-rpc request, a message larger than max_message_bytes (or a length
// prefix announcing one), or a partial message older than partial_message_timeout. Wrong argument
// counts, unknown methods and argument types answer with rpclib's error strings and keep the
// connection.
#ifndef CONVOY_SIMULATOR_BRIDGE_AIRSIM_AIRSIM_SERVER_H_
#define CONVOY_SIMULATOR_BRIDGE_AIRSIM_AIRSIM_SERVER_H_

#include <atomic>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "simulator_bridge/airsim/socket.h"
#include "simulator_bridge/world/embedded_sim.h"

namespace convoy::sim {

enum class SimClockMode { kRealTime, kLockStep };

struct AirSimServerOptions {
  EmbeddedSimOptions sim;  // every vehicle gets its own EmbeddedSim from these options
  std::vector<std::string> vehicle_names = {"PhysXCar"};
  std::string bind_address = "127.0.0.1";
  int port = 41451;  // 0: an ephemeral port, see AirSimServer::port()
  SimClockMode clock = SimClockMode::kRealTime;
  int max_connections = 64;
  size_t max_message_bytes = size_t{16} << 20;
  absl::Duration partial_message_timeout = absl::Seconds(30);
  absl::Duration send_timeout = absl::Seconds(30);
  // When set, every uncompressed scene image served is also written here as
  // <vehicle>_<sequence>.png.
  std::string dump_frames_dir;
};

class AirSimServer {
 public:
  // Binds, listens and starts serving. Fails on a bad option or when the port cannot be bound.
  static absl::StatusOr<std::unique_ptr<AirSimServer>> Start(const AirSimServerOptions& options);
  ~AirSimServer();

  // The bound port (the ephemeral one when options.port was 0).
  int port() const { return port_; }
  // Stops accepting, closes every connection and joins every thread. Idempotent.
  void Stop();

  struct Stats {
    int64_t connections_accepted = 0;
    int64_t connections_refused = 0;  // over max_connections
    int64_t connections_closed_for_errors = 0;
    int64_t requests = 0;
    std::map<std::string, int64_t> steps_by_vehicle;  // Physics steps each car was advanced.
  };
  Stats stats() const;

 private:
  struct Connection;
  struct Vehicle {
    std::unique_ptr<EmbeddedSim> sim;
    bool api_control = false;
    int64_t steps = 0;  // Physics steps served, across resets.
    std::vector<ImageResponse> responses;
  };
  class Handler;
  class Session;  // one connection's requests and answers

  explicit AirSimServer(const AirSimServerOptions& options);
  void AcceptLoop();
  void ServeConnection(Connection* connection);
  void TickLoop();
  void ReapConnections(bool all);

  AirSimServerOptions options_;
  int port_ = 0;
  ScopedFd listen_fd_;
  std::atomic<bool> stopping_{false};
  std::thread accept_thread_;
  std::thread tick_thread_;

  mutable absl::Mutex sim_mu_;
  std::map<std::string, Vehicle> vehicles_ ABSL_GUARDED_BY(sim_mu_);
  bool paused_ ABSL_GUARDED_BY(sim_mu_) = false;
  int64_t dumped_frames_ ABSL_GUARDED_BY(sim_mu_) = 0;

  mutable absl::Mutex connections_mu_;
  std::list<std::unique_ptr<Connection>> connections_ ABSL_GUARDED_BY(connections_mu_);
  Stats stats_ ABSL_GUARDED_BY(connections_mu_);

  friend class Handler;
  friend class Session;
};

}  // namespace convoy::sim

#endif  // CONVOY_SIMULATOR_BRIDGE_AIRSIM_AIRSIM_SERVER_H_
