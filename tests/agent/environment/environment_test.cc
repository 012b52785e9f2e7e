// --sim parsed once into a typed simulator target, and read back as the value it came from.
#include "agent/environment/environment.h"

#include <string>

#include "absl/flags/marshalling.h"
#include "tests/catch.h"

namespace convoy::agent {
namespace {

TEST_CASE("The simulator value embedded names the in-process simulator", "[environment]") {
  absl::StatusOr<SimTarget> target = ParseSimTarget("embedded");
  REQUIRE(target.ok());
  CHECK(target->kind == SimKind::kEmbedded);
  CHECK(SimTargetName(*target) == "embedded");
  const EnvironmentSpec spec;  // Named: GCC 12 misreads a temporary's SimTarget::host.
  CHECK(spec.sim.kind == SimKind::kEmbedded);
}

TEST_CASE("The simulator value airsim://host:port names an AirSim server and its port",
          "[environment]") {
  absl::StatusOr<SimTarget> target = ParseSimTarget("airsim://convoy-sim:41460");
  REQUIRE(target.ok());
  CHECK(target->kind == SimKind::kAirSim);
  CHECK(target->host == "convoy-sim");
  CHECK(target->port == 41460);
  CHECK(SimTargetName(*target) == "airsim://convoy-sim:41460");
}

TEST_CASE("The simulator value airsim://host without a port means AirSim's own port",
          "[environment]") {
  absl::StatusOr<SimTarget> target = ParseSimTarget("airsim://127.0.0.1");
  REQUIRE(target.ok());
  CHECK(target->host == "127.0.0.1");
  CHECK(target->port == 41451);
}

TEST_CASE("An unknown simulator value is refused, naming the values it takes", "[environment]") {
  for (const char* value : {"", "Embedded", "airsim:/host:1", "carla://host:2000"}) {
    INFO(value);
    absl::StatusOr<SimTarget> target = ParseSimTarget(value);
    REQUIRE_FALSE(target.ok());
    CHECK(target.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK(std::string(target.status().message()) ==
          std::string("--sim must be 'embedded' or 'airsim://host:port', got '") + value + "'");
  }
}

TEST_CASE("A simulator value whose port is not a number is refused", "[environment]") {
  absl::StatusOr<SimTarget> target = ParseSimTarget("airsim://host:port");
  REQUIRE_FALSE(target.ok());
  CHECK(target.status().message() == "bad port in --sim=airsim://host:port");
}

TEST_CASE("The simulator flag parses at start-up and prints back as given", "[environment]") {
  SimTarget target;
  std::string error;
  REQUIRE(absl::ParseFlag("airsim://10.0.0.2:41452", &target, &error));
  CHECK(target.kind == SimKind::kAirSim);
  CHECK(absl::UnparseFlag(target) == "airsim://10.0.0.2:41452");
  CHECK_FALSE(absl::ParseFlag("nowhere", &target, &error));
  CHECK(error == "--sim must be 'embedded' or 'airsim://host:port', got 'nowhere'");
}

}  // namespace
}  // namespace convoy::agent
