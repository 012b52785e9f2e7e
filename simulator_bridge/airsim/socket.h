// Small POSIX TCP helpers for the AirSim client and server: every call is bounded by a deadline.
#ifndef CONVOY_SIMULATOR_BRIDGE_AIRSIM_SOCKET_H_
#define CONVOY_SIMULATOR_BRIDGE_AIRSIM_SOCKET_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

namespace convoy::sim {

// An owned file descriptor, closed on destruction.
class ScopedFd {
 public:
  ScopedFd() = default;
  explicit ScopedFd(int fd) : fd_(fd) {}
  ScopedFd(ScopedFd&& other) noexcept : fd_(other.release()) {}
  ScopedFd& operator=(ScopedFd&& other) noexcept;
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  ~ScopedFd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

// Listens on bind_address:port (port 0: an ephemeral port) with SO_REUSEADDR; the port actually
// bound is returned through bound_port.
absl::StatusOr<ScopedFd> ListenTcp(const std::string& bind_address, int port, int* bound_port);

// Connects to host:port (a numeric address or a name), giving up at `timeout`. TCP_NODELAY is set.
absl::StatusOr<ScopedFd> ConnectTcp(const std::string& host, int port, absl::Duration timeout);

// Writes all of data, or fails at the deadline or on any socket error (never raises SIGPIPE).
absl::Status SendAll(int fd, const char* data, size_t size, absl::Time deadline);

// Writes all of the buffers, in order, with as few system calls as the socket allows (one when it
// has room); otherwise as SendAll.
absl::Status SendAllv(int fd, absl::Span<const absl::string_view> buffers, absl::Time deadline);

// Waits until fd is readable. OK when readable; DEADLINE_EXCEEDED at the deadline.
absl::Status WaitReadable(int fd, absl::Time deadline);

// True for 127.0.0.0/8, ::1 and "localhost".
bool IsLoopbackAddress(const std::string& address);

}  // namespace convoy::sim

#endif  // CONVOY_SIMULATOR_BRIDGE_AIRSIM_SOCKET_H_
