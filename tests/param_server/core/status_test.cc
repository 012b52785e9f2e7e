// The parameter server core's Status(): what it derives from the pushes it saw.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "param_server/core/parameter_server.h"
#include "tests/catch.h"

namespace convoy::ps {
namespace {

TEST_CASE("Pushes per second counts the accepted pushes over the time since start", "[status]") {
  ParameterServerOptions o;
  o.model = "tiny";
  o.max_staleness = 0;
  std::unique_ptr<ParameterServer> server = *ParameterServer::Create(o);
  CHECK(server->Status().pushes_per_second() == 0);
  std::vector<float> g(server->model().parameter_count, 0.01f);
  for (int i = 0; i < 3; ++i) {
    std::vector<float> values = g;
    REQUIRE(server->Apply("a", server->version(), 1, values).accepted);
  }
  std::vector<float> stale = g;
  REQUIRE_FALSE(server->Apply("a", 0, 1, stale).accepted);  // Rejected: not counted.
  const v1::StatusResponse status = server->Status();
  // Until a whole 10 s window has passed, the rate is over the time since start.
  const double span = std::min(10.0, status.uptime_seconds());
  REQUIRE(span > 0);
  CHECK(status.pushes_per_second() * span == Approx(3));
}

}  // namespace
}  // namespace convoy::ps

namespace convoy::ps {
namespace {

TEST_CASE("A server is not created with a run setting out of the table's range, which it names",
          "[status]") {
  ParameterServerOptions o;
  o.model = "tiny";
  o.n_step = 0;
  absl::StatusOr<std::unique_ptr<ParameterServer>> created = ParameterServer::Create(o);
  REQUIRE(created.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(created.status().message()),
             Catch::Matchers::ContainsSubstring("--n_step must be in [1, 100], got 0"));
  o.n_step = 3;
  o.gamma = 1.5;
  created = ParameterServer::Create(o);
  REQUIRE(created.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(created.status().message()),
             Catch::Matchers::ContainsSubstring("--gamma must be in [0, 1], got 1.5"));
}

}  // namespace
}  // namespace convoy::ps
