// ParameterServerService: the gRPC edge of the parameter server. Translates wire messages to the core's calls
// and absl::Status to grpc::Status, once, here.
#ifndef CONVOY_PARAM_SERVER_SERVICE_H_
#define CONVOY_PARAM_SERVER_SERVICE_H_

#include <atomic>
#include <string>
#include <utility>

#include "convoy/v1/parameter_server.grpc.pb.h"
#include "param_server/parameter_server.h"

namespace convoy {

// Thread-safe; every handler may run concurrently with every other.
class ParameterServerService final : public v1::ParameterServer::Service {
 public:
  // Every call must carry `auth_token` as a bearer token (an empty token accepts every call).
  ParameterServerService(ParameterServer* server, std::string auth_token)
      : server_(server), auth_token_(std::move(auth_token)) {}

  // From now on pushes are refused with UNAVAILABLE (SHUTTING_DOWN); pushes already being applied finish.
  void StopAcceptingPushes() { draining_.store(true); }

  grpc::Status Join(grpc::ServerContext* context, const v1::JoinRequest* request,
                    v1::JoinResponse* response) override;
  grpc::Status PullWeights(grpc::ServerContext* context, const v1::PullRequest* request,
                           grpc::ServerWriter<v1::WeightChunk>* writer) override;
  grpc::Status PushGradients(grpc::ServerContext* context,
                             grpc::ServerReader<v1::GradientChunk>* reader,
                             v1::PushResponse* response) override;
  grpc::Status GetStatus(grpc::ServerContext* context, const v1::StatusRequest* request,
                         v1::StatusResponse* response) override;

 private:
  // UNAUTHENTICATED (and counted) unless the call carries the token.
  grpc::Status Authorize(const grpc::ServerContext& context);

  ParameterServer* server_;
  const std::string auth_token_;
  std::atomic<bool> draining_{false};
};

// absl::Status -> grpc::Status with the same code and message.
grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace convoy

#endif  // CONVOY_PARAM_SERVER_SERVICE_H_
