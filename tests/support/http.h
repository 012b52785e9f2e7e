// One plain HTTP/1.0 exchange with a loopback port, as Prometheus scrapes a process's /metrics.
#ifndef CONVOY_TESTS_SUPPORT_HTTP_H_
#define CONVOY_TESTS_SUPPORT_HTTP_H_

#include <string>

#include "absl/status/statusor.h"

namespace convoy::testing {

struct HttpAnswer {
  std::string status_line;  // "HTTP/1.1 200 OK"
  std::string body;
};

// Sends `request` (whole, with its blank line) to 127.0.0.1:port and reads the answer until the
// server closes. Errors: UNAVAILABLE when the port does not answer.
absl::StatusOr<HttpAnswer> HttpExchange(int port, const std::string& request);

}  // namespace convoy::testing

#endif  // CONVOY_TESTS_SUPPORT_HTTP_H_
