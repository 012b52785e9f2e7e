// What tells a parameter server that is gone from one out of reach: a refused TCP connection, and a
// launcher's death; never a socket that listens without answering.
#include "agent/client/server_presence.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "tests/catch.h"

namespace convoy::agent {
namespace {

constexpr absl::Duration kProbeTimeout = absl::Seconds(5);

// A TCP socket on a loopback port; listening, or only bound (then nothing listens there).
class LoopbackSocket {
 public:
  explicit LoopbackSocket(bool listening) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address = {};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0);
    socklen_t length = sizeof(address);
    REQUIRE(::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) == 0);
    port_ = ntohs(address.sin_port);
    if (listening) REQUIRE(::listen(fd_, 16) == 0);
  }
  ~LoopbackSocket() { ::close(fd_); }
  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }

 private:
  int fd_ = -1;
  int port_ = 0;
};

TEST_CASE("A port nothing listens on refuses the probe", "[server_presence]") {
  const LoopbackSocket bound(/*listening=*/false);
  CHECK(ProbeTcpConnect(bound.address(), kProbeTimeout) == ConnectOutcome::kRefused);
  CHECK(ProbeTcpConnect("dns:///" + bound.address(), kProbeTimeout) == ConnectOutcome::kRefused);
}

TEST_CASE("A socket that listens but never accepts, as a stopped server's, takes the probe",
          "[server_presence]") {
  const LoopbackSocket listening(/*listening=*/true);
  CHECK(ProbeTcpConnect(listening.address(), kProbeTimeout) == ConnectOutcome::kConnected);
}

TEST_CASE("An address the probe cannot read is no evidence", "[server_presence]") {
  for (const std::string address : {"unix:/tmp/socket", "127.0.0.1", "127.0.0.1:0", "[::1:80"}) {
    CHECK(ProbeTcpConnect(address, kProbeTimeout) == ConnectOutcome::kNoAnswer);
  }
}

TEST_CASE("Every server refusing is evidence that it is gone, and one that listens is not",
          "[server_presence]") {
  const LoopbackSocket gone0(false), gone1(false), listening(true);
  CHECK(ProbeServerPresence({gone0.address(), gone1.address()}, ::getppid(), kProbeTimeout)
            ->Check() == ServerAbsence::kNothingListens);
  CHECK(ProbeServerPresence({gone0.address(), listening.address()}, ::getppid(), kProbeTimeout)
            ->Check() == ServerAbsence::kNoEvidence);
  CHECK(ProbeServerPresence({}, ::getppid(), kProbeTimeout)->Check() == ServerAbsence::kNoEvidence);
}

TEST_CASE("A new parent is a launcher's death only for a process given a parent-death signal",
          "[server_presence]") {
  int before = 0;
  REQUIRE(::prctl(PR_GET_PDEATHSIG, &before) == 0);
  // A parent other than the one now stands for the launcher that died.
  const pid_t other_parent = ::getppid() + 1;
  REQUIRE(::prctl(PR_SET_PDEATHSIG, 0) == 0);
  CHECK(ProbeServerPresence({}, other_parent, kProbeTimeout)->Check() ==
        ServerAbsence::kNoEvidence);
  REQUIRE(::prctl(PR_SET_PDEATHSIG, SIGTERM) == 0);
  CHECK(ProbeServerPresence({}, other_parent, kProbeTimeout)->Check() ==
        ServerAbsence::kLauncherDied);
  CHECK(ProbeServerPresence({}, ::getppid(), kProbeTimeout)->Check() == ServerAbsence::kNoEvidence);
  REQUIRE(::prctl(PR_SET_PDEATHSIG, before) == 0);
}

}  // namespace
}  // namespace convoy::agent
