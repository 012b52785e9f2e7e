#include "simulator_bridge/airsim/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace convoy::sim {
namespace {

absl::Status Errno(absl::string_view what) {
  return absl::UnavailableError(absl::StrCat(what, ": ", std::strerror(errno)));
}

int PollTimeoutMs(absl::Time deadline) {
  if (deadline == absl::InfiniteFuture()) return -1;
  const absl::Duration left = deadline - absl::Now();
  if (left <= absl::ZeroDuration()) return 0;
  return static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(left) + 1, 1 << 30));
}

}  // namespace

ScopedFd& ScopedFd::operator=(ScopedFd&& other) noexcept {
  if (this != &other) reset(other.release());
  return *this;
}

void ScopedFd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

absl::StatusOr<ScopedFd> ListenTcp(const std::string& bind_address, int port, int* bound_port) {
  if (port < 0 || port > 65535) return absl::InvalidArgumentError(absl::StrCat("bad port ", port));
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (int rc = getaddrinfo(bind_address.c_str(), service.c_str(), &hints, &found); rc != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot resolve bind address ", bind_address, ": ", gai_strerror(rc)));
  }
  absl::Status last = absl::UnavailableError("no address");
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    ScopedFd fd(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
    if (!fd.valid()) {
      last = Errno("socket");
      continue;
    }
    const int one = 1;
    setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd.get(), a->ai_addr, a->ai_addrlen) != 0) {
      last = Errno(absl::StrCat("bind ", bind_address, ":", port));
      continue;
    }
    if (::listen(fd.get(), 128) != 0) {
      last = Errno("listen");
      continue;
    }
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len);
    *bound_port = addr.ss_family == AF_INET6
                      ? ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port)
                      : ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
    freeaddrinfo(found);
    return fd;
  }
  freeaddrinfo(found);
  return last;
}

absl::StatusOr<ScopedFd> ConnectTcp(const std::string& host, int port, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0) {
    return absl::UnavailableError(absl::StrCat("cannot resolve ", host, ": ", gai_strerror(rc)));
  }
  absl::Status last = absl::UnavailableError("no address");
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    ScopedFd fd(
        ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol));
    if (!fd.valid()) {
      last = Errno("socket");
      continue;
    }
    if (::connect(fd.get(), a->ai_addr, a->ai_addrlen) != 0) {
      if (errno != EINPROGRESS) {
        last = Errno(absl::StrCat("connect ", host, ":", port));
        continue;
      }
      pollfd p{fd.get(), POLLOUT, 0};
      const int rc = ::poll(&p, 1, PollTimeoutMs(deadline));
      int error = 0;
      socklen_t len = sizeof(error);
      if (rc <= 0) {
        last =
            absl::DeadlineExceededError(absl::StrCat("connect ", host, ":", port, ": timed out"));
        continue;
      }
      getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &len);
      if (error != 0) {
        errno = error;
        last = Errno(absl::StrCat("connect ", host, ":", port));
        continue;
      }
    }
    const int flags = fcntl(fd.get(), F_GETFL, 0);
    fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK);
    const int one = 1;
    setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    freeaddrinfo(found);
    return fd;
  }
  freeaddrinfo(found);
  return last;
}

absl::Status SendAll(int fd, const char* data, size_t size, absl::Time deadline) {
  const absl::string_view one(data, size);
  return SendAllv(fd, absl::MakeConstSpan(&one, 1), deadline);
}

absl::Status SendAllv(int fd, absl::Span<const absl::string_view> buffers, absl::Time deadline) {
  constexpr size_t kMaxIov = 16;
  size_t first = 0;   // the first buffer not fully sent
  size_t offset = 0;  // bytes of it already sent
  while (first < buffers.size()) {
    iovec iov[kMaxIov];
    size_t count = 0;
    for (size_t i = first; i < buffers.size() && count < kMaxIov; ++i) {
      const size_t skip = i == first ? offset : 0;
      if (buffers[i].size() == skip) continue;
      iov[count].iov_base = const_cast<char*>(buffers[i].data() + skip);
      iov[count].iov_len = buffers[i].size() - skip;
      ++count;
    }
    if (count == 0) break;
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = count;
    const ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      size_t sent = static_cast<size_t>(n);
      while (first < buffers.size() && sent >= buffers[first].size() - offset) {
        sent -= buffers[first].size() - offset;
        offset = 0;
        ++first;
      }
      offset += sent;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p{fd, POLLOUT, 0};
      const int rc = ::poll(&p, 1, PollTimeoutMs(deadline));
      if (rc == 0) return absl::DeadlineExceededError("send timed out");
      if (rc < 0 && errno != EINTR) return Errno("poll");
      continue;
    }
    return Errno("sendmsg");
  }
  return absl::OkStatus();
}

absl::Status WaitReadable(int fd, absl::Time deadline) {
  while (true) {
    pollfd p{fd, POLLIN, 0};
    const int rc = ::poll(&p, 1, PollTimeoutMs(deadline));
    if (rc > 0) return absl::OkStatus();
    if (rc == 0) return absl::DeadlineExceededError("timed out waiting for data");
    if (errno != EINTR) return Errno("poll");
  }
}

bool IsLoopbackAddress(const std::string& address) {
  if (address == "localhost" || address == "::1") return true;
  in_addr v4{};
  if (inet_pton(AF_INET, address.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  return false;
}

}  // namespace convoy::sim
