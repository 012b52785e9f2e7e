#include "param_server/service/health_service.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/wire/security.h"

namespace convoy::ps {
namespace {
using grpc::health::v1::HealthCheckResponse;
// How often a Watch stream notices that its client went away. A status change and Shutdown wake the
// stream at once (the condition below); a cancelled call does not, since the synchronous API has no
// notification for it, so that alone is polled.
constexpr absl::Duration kWatchPoll = absl::Milliseconds(200);
}  // namespace

HealthService::HealthService(std::vector<std::string> services, std::string auth_token,
                             bool without_auth, std::function<void()> on_unauthenticated)
    : services_(std::move(services)),
      auth_token_(std::move(auth_token)),
      without_auth_(without_auth),
      on_unauthenticated_(std::move(on_unauthenticated)) {}

void HealthService::SetServing(bool serving) {
  absl::MutexLock lock(&mu_);
  if (serving_ != serving) ++changes_;
  serving_ = serving;
}

void HealthService::Shutdown() {
  absl::MutexLock lock(&mu_);
  serving_ = false;
  shutdown_ = true;
  ++changes_;
}

grpc::Status HealthService::Authorize(const grpc::ServerContext& context) {
  if (without_auth_ || CallAuthorized(context, auth_token_)) return grpc::Status::OK;
  on_unauthenticated_();
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "missing or wrong bearer token");
}

bool HealthService::Known(const std::string& service) const {
  return service.empty() || std::find(services_.begin(), services_.end(), service) != services_.end();
}

grpc::Status HealthService::Check(grpc::ServerContext* context,
                                  const grpc::health::v1::HealthCheckRequest* request,
                                  HealthCheckResponse* response) {
  if (grpc::Status s = Authorize(*context); !s.ok()) return s;
  if (!Known(request->service())) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        absl::StrCat("unknown service '", request->service(), "'"));
  }
  absl::MutexLock lock(&mu_);
  response->set_status(serving_ ? HealthCheckResponse::SERVING : HealthCheckResponse::NOT_SERVING);
  return grpc::Status::OK;
}

grpc::Status HealthService::Watch(grpc::ServerContext* context,
                                  const grpc::health::v1::HealthCheckRequest* request,
                                  grpc::ServerWriter<HealthCheckResponse>* writer) {
  if (grpc::Status s = Authorize(*context); !s.ok()) return s;
  uint64_t seen = UINT64_MAX;
  while (!context->IsCancelled()) {
    HealthCheckResponse response;
    bool shutdown;
    {
      absl::MutexLock lock(&mu_);
      auto changed = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return changes_ != seen || shutdown_; };
      mu_.AwaitWithTimeout(absl::Condition(&changed), kWatchPoll);
      if (changes_ == seen && !shutdown_) continue;
      seen = changes_;
      shutdown = shutdown_;
      response.set_status(!Known(request->service()) ? HealthCheckResponse::SERVICE_UNKNOWN
                          : serving_                 ? HealthCheckResponse::SERVING
                                                     : HealthCheckResponse::NOT_SERVING);
    }
    if (!writer->Write(response) || shutdown) break;
  }
  return grpc::Status::OK;
}

}  // namespace convoy::ps
