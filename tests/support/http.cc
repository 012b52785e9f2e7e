#include "tests/support/http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace convoy::testing {

absl::StatusOr<HttpAnswer> HttpExchange(int port, const std::string& request) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("socket: ", std::strerror(errno)));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      ::write(fd, request.data(), request.size()) != static_cast<ssize_t>(request.size())) {
    const int error = errno;
    ::close(fd);
    return absl::UnavailableError(
        absl::StrCat("127.0.0.1:", port, " did not answer: ", std::strerror(error)));
  }
  std::string response;
  char buffer[65536];
  ssize_t n;
  while ((n = ::read(fd, buffer, sizeof(buffer))) > 0) {
    response.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  HttpAnswer answer;
  answer.status_line = response.substr(0, response.find("\r\n"));
  const size_t body = response.find("\r\n\r\n");
  if (body != std::string::npos) answer.body = response.substr(body + 4);
  return answer;
}

}  // namespace convoy::testing
