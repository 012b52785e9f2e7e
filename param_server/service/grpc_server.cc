#include "param_server/service/grpc_server.h"

#include <glog/logging.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/support/status_macros.h"
#include "common/wire/tensor_encoding.h"

namespace convoy::ps {
namespace {
// Room for a chunk's header fields around its payload.
constexpr int kMaxMessageBytes = static_cast<int>(kMaxChunkPayloadBytes) + 1024;
// Threads of gRPC's synchronous server, which serves only the health service (its Watch streams
// hold one each). The parameter server's own methods are callbacks and hold none: their memory is
// bounded by the service's push buffers (service.h).
constexpr int kMaxHealthThreads = 64;
// Concurrent streams one client connection may hold open (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS),
// so one misbehaving client cannot queue up every push buffer. An agent needs one at a time.
constexpr int kMaxStreamsPerConnection = 8;
}  // namespace

absl::StatusOr<std::unique_ptr<GrpcParameterServer>> GrpcParameterServer::Start(
    std::unique_ptr<ParameterServer> server, const std::string& address,
    const ServerSecurity& security, const ServiceOptions& service) {
  CONVOY_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> credentials,
                          MakeServerCredentials(security));
  std::unique_ptr<GrpcParameterServer> self(new GrpcParameterServer());
  self->core_ = std::move(server);
  ParameterServer* core = self->core_.get();
  self->service_ = std::make_unique<ParameterServerService>(core, security.auth_token, service);
  self->health_ = std::make_unique<HealthService>(
      std::vector<std::string>{kParameterServerServiceName}, security.auth_token,
      security.health_without_auth, [core] { core->CountUnauthenticated(); });
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address, credentials, &self->port_);
  builder.RegisterService(self->service_.get());
  builder.RegisterService(self->health_.get());
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  builder.SetMaxSendMessageSize(kMaxMessageBytes);
  grpc::ResourceQuota quota("convoy_ps");
  quota.SetMaxThreads(kMaxHealthThreads);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, kMaxStreamsPerConnection);
  // No SO_REUSEPORT: a second server on the same port (a stale PS still running, or another process
  // that took the port while this one restarted) must fail to start, not silently take half the
  // agents.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  if (service.receive_window_bytes > 0) {
    // A fixed window instead of gRPC's adaptive one (BDP probing), which grows each connection's to
    // megabytes: a push waiting for a buffer holds at most this much of its agent's data here.
    builder.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
    builder.AddChannelArgument(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES,
                               static_cast<int>(service.receive_window_bytes));
  }
  builder.SetResourceQuota(quota);
  self->server_ = builder.BuildAndStart();
  if (self->server_ == nullptr || self->port_ == 0) {
    // Nothing was served: no drain, and no final checkpoint (a failed start changes no state).
    self->stopped_ = true;
    return absl::UnavailableError(absl::StrCat("cannot listen on ", address));
  }
  self->health_->SetServing(true);
  return self;
}

std::unique_ptr<ParameterServer> GrpcParameterServer::TakeCore() {
  Shutdown(absl::ZeroDuration()).IgnoreError();
  return std::move(core_);
}

GrpcParameterServer::~GrpcParameterServer() {
  if (!stopped_) Shutdown(absl::ZeroDuration()).IgnoreError();
}

absl::Status GrpcParameterServer::Shutdown(absl::Duration grace) {
  if (stopped_) return absl::OkStatus();
  stopped_ = true;
  health_->Shutdown();
  service_->StopAcceptingPushes();
  server_->Shutdown(absl::ToChronoTime(absl::Now() + grace));
  server_->Wait();
  if (core_->options().checkpoint_dir.empty()) return absl::OkStatus();
  CONVOY_ASSIGN_OR_RETURN(const std::string path, core_->Checkpoint());
  LOG(INFO) << "final checkpoint " << path << " at version " << core_->version();
  return absl::OkStatus();
}

}  // namespace convoy::ps
