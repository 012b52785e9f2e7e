#include "agent/client/server_presence.h"

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/support/child_process.h"

namespace convoy::agent {
namespace {

struct HostPort {
  std::string host;
  std::string port;
};

// "host:port", "[v6]:port" or "dns:///host:port"; false for any other form.
bool SplitAddress(absl::string_view address, HostPort* out) {
  if (absl::ConsumePrefix(&address, "dns:")) {
    // dns:[//authority/]host:port
    if (absl::ConsumePrefix(&address, "//")) {
      const size_t slash = address.find('/');
      if (slash == absl::string_view::npos) return false;
      address.remove_prefix(slash + 1);
    }
  }
  const size_t colon = address.rfind(':');
  if (colon == absl::string_view::npos || colon == 0) return false;
  absl::string_view host = address.substr(0, colon);
  const absl::string_view port = address.substr(colon + 1);
  int port_number = 0;
  if (!absl::SimpleAtoi(port, &port_number) || port_number <= 0 || port_number > 65535) {
    return false;
  }
  if (absl::ConsumePrefix(&host, "[") && !absl::ConsumeSuffix(&host, "]")) return false;
  if (host.empty() || absl::StrContains(host, '/')) return false;
  out->host = std::string(host);
  out->port = std::string(port);
  return true;
}

// The addresses `where` resolves to, or empty when it does not resolve by `deadline`. A name is
// looked up on a thread of its own, as a resolver behind a partition may take longer than the
// probe may.
struct Resolution {
  absl::Mutex mu;
  bool done ABSL_GUARDED_BY(mu) = false;
  addrinfo* result ABSL_GUARDED_BY(mu) = nullptr;
  bool abandoned ABSL_GUARDED_BY(mu) = false;
};

addrinfo* Resolve(const HostPort& where, absl::Time deadline) {
  addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
  addrinfo* numeric = nullptr;
  if (::getaddrinfo(where.host.c_str(), where.port.c_str(), &hints, &numeric) == 0) return numeric;
  auto resolution = std::make_shared<Resolution>();
  std::thread([resolution, where] {
    addrinfo name_hints = {};
    name_hints.ai_family = AF_UNSPEC;
    name_hints.ai_socktype = SOCK_STREAM;
    name_hints.ai_flags = AI_NUMERICSERV;
    addrinfo* found = nullptr;
    if (::getaddrinfo(where.host.c_str(), where.port.c_str(), &name_hints, &found) != 0) {
      found = nullptr;
    }
    absl::MutexLock lock(&resolution->mu);
    if (resolution->abandoned) {
      if (found != nullptr) ::freeaddrinfo(found);
      return;
    }
    resolution->result = found;
    resolution->done = true;
  }).detach();
  absl::MutexLock lock(&resolution->mu);
  resolution->mu.AwaitWithDeadline(absl::Condition(&resolution->done), deadline);
  if (!resolution->done) {
    resolution->abandoned = true;
    return nullptr;
  }
  return resolution->result;
}

// One address: connected, refused, or anything else (kNoAnswer).
ConnectOutcome Connect(const addrinfo& to, absl::Time deadline) {
  const int fd =
      ::socket(to.ai_family, to.ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, to.ai_protocol);
  if (fd < 0) return ConnectOutcome::kNoAnswer;
  int error = 0;
  if (::connect(fd, to.ai_addr, to.ai_addrlen) != 0) {
    error = errno;
    if (error == EINPROGRESS) {
      pollfd p = {fd, POLLOUT, 0};
      const int wait_ms =
          static_cast<int>(std::max<int64_t>(0, absl::ToInt64Milliseconds(deadline - absl::Now())));
      int ready;
      do {
        ready = ::poll(&p, 1, wait_ms);
      } while (ready < 0 && errno == EINTR);
      socklen_t length = sizeof(error);
      if (ready != 1 || ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) != 0) {
        error = ETIMEDOUT;
      }
    }
  }
  ::close(fd);
  if (error == 0) return ConnectOutcome::kConnected;
  return error == ECONNREFUSED ? ConnectOutcome::kRefused : ConnectOutcome::kNoAnswer;
}

class ProbedServerPresence final : public ServerPresence {
 public:
  ProbedServerPresence(std::vector<std::string> addresses, pid_t parent_at_start,
                       absl::Duration probe_timeout)
      : addresses_(std::move(addresses)),
        parent_at_start_(parent_at_start),
        probe_timeout_(probe_timeout) {}

  ServerAbsence Check() override {
    if (LauncherDied(parent_at_start_)) return ServerAbsence::kLauncherDied;
    if (addresses_.empty()) return ServerAbsence::kNoEvidence;
    for (const std::string& address : addresses_) {
      if (ProbeTcpConnect(address, probe_timeout_) != ConnectOutcome::kRefused) {
        return ServerAbsence::kNoEvidence;
      }
    }
    return ServerAbsence::kNothingListens;
  }

 private:
  const std::vector<std::string> addresses_;
  const pid_t parent_at_start_;
  const absl::Duration probe_timeout_;
};

}  // namespace

const char* ServerAbsenceName(ServerAbsence absence) {
  switch (absence) {
    case ServerAbsence::kNoEvidence:
      return "no evidence that the parameter server is gone";
    case ServerAbsence::kNothingListens:
      return "nothing listens at the parameter server's address any more";
    case ServerAbsence::kLauncherDied:
      return "the launcher that started this agent and its parameter server died";
  }
  return "unknown";  // Unreachable: the switch names every value.
}

ConnectOutcome ProbeTcpConnect(const std::string& address, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  HostPort where;
  if (!SplitAddress(address, &where)) return ConnectOutcome::kNoAnswer;
  addrinfo* const resolved = Resolve(where, deadline);
  if (resolved == nullptr) return ConnectOutcome::kNoAnswer;
  ConnectOutcome outcome = ConnectOutcome::kRefused;
  for (const addrinfo* a = resolved; a != nullptr; a = a->ai_next) {
    const ConnectOutcome one = Connect(*a, deadline);
    if (one == ConnectOutcome::kConnected) {
      outcome = one;
      break;
    }
    if (one == ConnectOutcome::kNoAnswer) outcome = one;
  }
  ::freeaddrinfo(resolved);
  return outcome;
}

std::unique_ptr<ServerPresence> ProbeServerPresence(std::vector<std::string> addresses,
                                                    pid_t parent_at_start,
                                                    absl::Duration probe_timeout) {
  return std::make_unique<ProbedServerPresence>(std::move(addresses), parent_at_start,
                                                probe_timeout);
}

}  // namespace convoy::agent
