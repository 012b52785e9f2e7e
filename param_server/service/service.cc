#include "param_server/service/service.h"

#include <glog/logging.h>
#include <grpcpp/impl/rpc_service_method.h>
#include <grpcpp/support/server_callback.h>

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/wire/grpc_status.h"
#include "common/wire/security.h"
#include "convoy/v1/parameter_server.grpc.pb.h"
#include "param_server/service/pull_reactor.h"
#include "param_server/service/push_reactor.h"

namespace convoy::ps {

uint32_t PushBuffersFor(const ServiceOptions& options, uint32_t max_pushes_per_step) {
  if (options.push_buffers > 0) return options.push_buffers;
  return 2 * std::max<uint32_t>(max_pushes_per_step, 1) + 4;
}

uint32_t ConcurrentPullsFor(const ServiceOptions& options, uint32_t max_pushes_per_step) {
  if (options.concurrent_pulls > 0) return options.concurrent_pulls;
  return PushBuffersFor(ServiceOptions(), max_pushes_per_step);
}

ParameterServerService::ParameterServerService(ParameterServer* server, std::string auth_token,
                                               ServiceOptions options)
    : server_(server),
      auth_token_(std::move(auth_token)),
      options_(options),
      buffers_(PushBuffersFor(options, server->options().max_pushes_per_step),
               server->model().parameter_count, options.max_waiting_pushes),
      pulls_(ConcurrentPullsFor(options, server->options().max_pushes_per_step),
             options.max_waiting_pulls) {
  using grpc::internal::RpcMethod;
  using grpc::internal::RpcServiceMethod;
  const std::string prefix = absl::StrCat("/", v1::ParameterServer::service_full_name(), "/");
  method_names_ = {prefix + "Join", prefix + "PullWeights", prefix + "PushGradients",
                   prefix + "GetStatus"};
  const RpcMethod::RpcType types[] = {RpcMethod::NORMAL_RPC, RpcMethod::SERVER_STREAMING,
                                      RpcMethod::CLIENT_STREAMING, RpcMethod::NORMAL_RPC};
  for (int i = 0; i < 4; ++i) {
    AddMethod(new RpcServiceMethod(method_names_[i].c_str(), types[i], nullptr));
  }
  MarkMethodCallback(
      0, new grpc::internal::CallbackUnaryHandler<v1::JoinRequest, v1::JoinResponse>(
             [this](grpc::CallbackServerContext* context, const v1::JoinRequest* request,
                    v1::JoinResponse* response) { return Join(context, request, response); }));
  MarkMethodCallback(
      1, new grpc::internal::CallbackServerStreamingHandler<v1::PullRequest, grpc::ByteBuffer>(
             [this](grpc::CallbackServerContext* context, const v1::PullRequest* request) {
               return PullWeights(context, request);
             }));
  MarkMethodCallback(
      2, new grpc::internal::CallbackClientStreamingHandler<IncomingChunk<v1::GradientChunk>,
                                                            v1::PushResponse>(
             [this](grpc::CallbackServerContext* context, v1::PushResponse* response) {
               return PushGradients(context, response);
             }));
  MarkMethodCallback(
      3,
      new grpc::internal::CallbackUnaryHandler<v1::StatusRequest, v1::StatusResponse>(
          [this](grpc::CallbackServerContext* context, const v1::StatusRequest* request,
                 v1::StatusResponse* response) { return GetStatus(context, request, response); }));
  if (options_.stream_idle_timeout > absl::ZeroDuration()) {
    // At least a nanosecond: a sub-nanosecond timeout's quarter rounds to zero.
    const absl::Duration check_every =
        std::clamp(options_.stream_idle_timeout / 4, absl::Nanoseconds(1), absl::Seconds(1));
    watchdog_ = std::make_unique<PeriodicTask>("push stream watchdog", check_every,
                                               [this] { CancelIdleStreams(); });
  }
}

// Stops the watchdog first: it reads the streams and the timeout.
ParameterServerService::~ParameterServerService() { watchdog_.reset(); }

void ParameterServerService::Watch(PushReactor* reactor) {
  absl::MutexLock lock(&streams_mu_);
  streams_[reactor] = absl::Now();
}

void ParameterServerService::Touch(PushReactor* reactor) {
  absl::MutexLock lock(&streams_mu_);
  if (auto it = streams_.find(reactor); it != streams_.end()) it->second = absl::Now();
}

void ParameterServerService::Unwatch(PushReactor* reactor) {
  absl::MutexLock lock(&streams_mu_);
  streams_.erase(reactor);
}

void ParameterServerService::CancelIdleStreams() {
  const absl::Time now = absl::Now();
  {
    absl::MutexLock lock(&streams_mu_);
    for (auto it = streams_.begin(); it != streams_.end();) {
      if (now - it->second > options_.stream_idle_timeout) {
        it->first->TimeOut();
        streams_.erase(it++);  // Cancelled once.
      } else {
        ++it;
      }
    }
  }
  // A pull whose push never came (or was refused before its header arrived) gets the newest
  // weights.
  if (size_t expired = followed_.Expire(now - options_.stream_idle_timeout); expired > 0) {
    VLOG(1) << expired << " pulls waited " << options_.stream_idle_timeout
            << " for the push they follow; answered with the newest weights";
  }
}

grpc::Status ParameterServerService::Authorize(const grpc::CallbackServerContext& context) {
  if (CallAuthorized(context, auth_token_)) return grpc::Status::OK;
  server_->CountUnauthenticated();
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "missing or wrong bearer token");
}

grpc::Status ParameterServerService::AfterApply(const PushAnswer& outcome) {
  if (!has_hook_.load()) return grpc::Status::OK;
  absl::MutexLock lock(&hook_mu_);
  return after_apply_ ? after_apply_(outcome) : grpc::Status::OK;
}

v1::StatusResponse ParameterServerService::Status() const {
  v1::StatusResponse status = server_->Status();
  status.set_push_buffers(static_cast<uint32_t>(buffers_.capacity()));
  status.set_push_buffers_in_use(static_cast<uint32_t>(buffers_.in_use()));
  status.set_pushes_waiting(static_cast<uint32_t>(buffers_.waiting()));
  status.set_push_buffer_bytes(buffers_.bytes());
  status.set_concurrent_pulls(static_cast<uint32_t>(pulls_.slots()));
  status.set_pulls_waiting(static_cast<uint32_t>(pulls_.waiting()));
  return status;
}

grpc::ServerUnaryReactor* ParameterServerService::Join(grpc::CallbackServerContext* context,
                                                       const v1::JoinRequest* request,
                                                       v1::JoinResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (grpc::Status s = Authorize(*context); !s.ok()) {
    reactor->Finish(s);
    return reactor;
  }
  absl::StatusOr<v1::JoinResponse> joined = server_->Join(*request);
  if (!joined.ok()) {
    reactor->Finish(ToGrpcStatus(joined.status()));
    return reactor;
  }
  *response = *std::move(joined);
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* ParameterServerService::PullWeights(
    grpc::CallbackServerContext* context, const v1::PullRequest* request) {
  return new PullReactor(this, context, request);
}

grpc::ServerReadReactor<IncomingChunk<v1::GradientChunk>>* ParameterServerService::PushGradients(
    grpc::CallbackServerContext* context, v1::PushResponse* response) {
  return new PushReactor(this, context, response);
}

grpc::ServerUnaryReactor* ParameterServerService::GetStatus(grpc::CallbackServerContext* context,
                                                            const v1::StatusRequest* /*request*/,
                                                            v1::StatusResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (grpc::Status s = Authorize(*context); !s.ok()) {
    reactor->Finish(s);
    return reactor;
  }
  *response = Status();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace convoy::ps
