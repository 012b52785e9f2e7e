// HealthService: the standard grpc.health.v1.Health protocol, answered by convoy_ps itself so that health
// checks go through the same bearer-token check as every other call (unless --health_without_auth).
#ifndef CONVOY_PARAM_SERVER_SERVICE_HEALTH_SERVICE_H_
#define CONVOY_PARAM_SERVER_SERVICE_HEALTH_SERVICE_H_

#include <functional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace convoy::ps {

// Thread-safe.
class HealthService final : public grpc::health::v1::Health::Service {
 public:
  // `services` are the names reported (besides "", the whole server). `on_unauthenticated` counts refusals.
  HealthService(std::vector<std::string> services, std::string auth_token, bool without_auth,
                std::function<void()> on_unauthenticated);

  // SERVING or NOT_SERVING for every service; Watch streams see the change.
  void SetServing(bool serving) ABSL_LOCKS_EXCLUDED(mu_);
  // Ends every Watch stream, so a server shutdown does not wait for them.
  void Shutdown() ABSL_LOCKS_EXCLUDED(mu_);

  grpc::Status Check(grpc::ServerContext* context,
                     const grpc::health::v1::HealthCheckRequest* request,
                     grpc::health::v1::HealthCheckResponse* response) override;
  grpc::Status Watch(grpc::ServerContext* context,
                     const grpc::health::v1::HealthCheckRequest* request,
                     grpc::ServerWriter<grpc::health::v1::HealthCheckResponse>* writer) override;

 private:
  grpc::Status Authorize(const grpc::ServerContext& context);
  bool Known(const std::string& service) const;

  const std::vector<std::string> services_;
  const std::string auth_token_;
  const bool without_auth_;
  const std::function<void()> on_unauthenticated_;
  absl::Mutex mu_;
  bool serving_ ABSL_GUARDED_BY(mu_) = false;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t changes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace convoy::ps

#endif  // CONVOY_PARAM_SERVER_SERVICE_HEALTH_SERVICE_H_
