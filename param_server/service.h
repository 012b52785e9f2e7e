// ParameterServerService: the gRPC edge of the parameter server. Translates wire messages to the core's calls
// and absl::Status to grpc::Status, once, here.
#ifndef CONVOY_PARAM_SERVER_SERVICE_H_
#define CONVOY_PARAM_SERVER_SERVICE_H_

#include <atomic>

#include "convoy/v1/parameter_server.grpc.pb.h"
#include "param_server/parameter_server.h"

namespace convoy {

// Thread-safe; every handler may run concurrently with every other.
class ParameterServerService final : public v1::ParameterServer::Service {
 public:
  explicit ParameterServerService(ParameterServer* server) : server_(server) {}

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
  ParameterServer* server_;
  std::atomic<bool> draining_{false};
};

// absl::Status -> grpc::Status with the same code and message.
grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace convoy

#endif  // CONVOY_PARAM_SERVER_SERVICE_H_
