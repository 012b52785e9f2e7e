// A real convoy parameter server on 127.0.0.1, in-process, for integration tests.
#ifndef CONVOY_TESTS_PARAM_SERVER_SERVICE_LOOPBACK_SERVER_H_
#define CONVOY_TESTS_PARAM_SERVER_SERVICE_LOOPBACK_SERVER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/client/ps_client.h"
#include "param_server/service/grpc_server.h"
#include "tests/catch.h"

namespace convoy::testing {

struct LoopbackServer {
  explicit LoopbackServer(const ps::ParameterServerOptions& options,
                          ServerSecurity security = PlaintextSecurity(),
                          const ps::ServiceOptions& service = {}) {
    absl::StatusOr<std::unique_ptr<ps::ParameterServer>> core = ps::ParameterServer::Create(options);
    REQUIRE(core.ok());
    absl::StatusOr<std::unique_ptr<ps::GrpcParameterServer>> started =
        ps::GrpcParameterServer::Start(*std::move(core), "127.0.0.1:0", security, service);
    REQUIRE(started.ok());
    server = *std::move(started);
    address = absl::StrCat("127.0.0.1:", server->port());
    if (security.tls_cert_file.empty()) {
      channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
      stub = v1::ParameterServer::NewStub(channel);
    }
  }

  static ServerSecurity PlaintextSecurity() {
    ServerSecurity plaintext;
    plaintext.insecure = true;
    return plaintext;
  }

  agent::PsClientOptions ClientOptions(const std::string& agent_id) const {
    agent::PsClientOptions o;
    o.address = address;
    o.agent_id = agent_id;
    o.hostname = "test";
    o.model_fingerprint = server->core().model().fingerprint;
    o.retry_for = absl::Seconds(5);
    return o;
  }

  // GetStatus's answer: the core's, with the service's admission figures.
  v1::StatusResponse Status() const { return server->service().Status(); }

  std::unique_ptr<ps::GrpcParameterServer> server;
  std::string address;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::ParameterServer::Stub> stub;
};

// A client's copy of the newest online weights and the version and incarnation they are at, which
// its next push names as its base: the pull-then-push cycle of the load and concurrency tests.
struct PulledWeights {
  uint64_t version = 0;
  uint64_t incarnation = 0;
  std::vector<float> weights;

  // Pulls the online network when the server's is newer than this copy.
  absl::Status Refresh(agent::PsClient& client) {
    absl::StatusOr<agent::PullResult> pulled =
        client.Pull(version, incarnation, v1::NETWORK_ONLINE, &weights);
    if (!pulled.ok()) return pulled.status();
    version = pulled->version;
    incarnation = pulled->incarnation;
    return absl::OkStatus();
  }
};

}  // namespace convoy::testing

#endif  // CONVOY_TESTS_PARAM_SERVER_SERVICE_LOOPBACK_SERVER_H_
