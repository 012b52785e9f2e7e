// GrpcParameterServer: a ParameterServer served over gRPC with the standard health service, started
// and stopped in the order a clean shutdown needs. Used by convoy_ps and by the tests.
#ifndef CONVOY_PARAM_SERVER_SERVICE_GRPC_SERVER_H_
#define CONVOY_PARAM_SERVER_SERVICE_GRPC_SERVER_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/wire/security.h"
#include "param_server/core/parameter_server.h"
#include "param_server/service/health_service.h"
#include "param_server/service/service.h"

namespace convoy::ps {

// The gRPC service name the health service reports, besides the whole server ("").
inline constexpr char kParameterServerServiceName[] = "convoy.v1.ParameterServer";

class GrpcParameterServer {
 public:
  // Listens on `address` ("host:port"; port 0 picks a free one) with `security` (TLS or explicit
  // plaintext, bearer token) and reports SERVING. `service` bounds the pushes in flight and says
  // when an idle push stream is cancelled (service.h). Errors: the credentials' (a missing TLS
  // file, TLS neither given nor waived with insecure); UNAVAILABLE when the address cannot be
  // bound.
  static absl::StatusOr<std::unique_ptr<GrpcParameterServer>> Start(
      std::unique_ptr<ParameterServer> server, const std::string& address,
      const ServerSecurity& security, const ServiceOptions& service = {});
  ~GrpcParameterServer();

  // The clean stop: NOT_SERVING, refuse new pushes, let in-flight RPCs finish (cancelling those
  // still running after `grace`; a push already received is still applied and answered), then
  // write a final checkpoint when checkpoints are on.
  // Idempotent. Returns the final checkpoint's status (OK when checkpoints are off).
  absl::Status Shutdown(absl::Duration grace = absl::Seconds(10));

  // Shuts down (as Shutdown with no grace) and hands back the core, to be served again: for tests
  // of a server that is unreachable for a while yet keeps its state and incarnation.
  std::unique_ptr<ParameterServer> TakeCore();

  int port() const { return port_; }
  ParameterServer& core() { return *core_; }
  ParameterServerService& service() { return *service_; }

 private:
  GrpcParameterServer() = default;

  std::unique_ptr<ParameterServer> core_;
  std::unique_ptr<ParameterServerService> service_;
  std::unique_ptr<HealthService> health_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  bool stopped_ = false;
};

}  // namespace convoy::ps

#endif  // CONVOY_PARAM_SERVER_SERVICE_GRPC_SERVER_H_
