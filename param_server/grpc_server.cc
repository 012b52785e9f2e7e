#include "param_server/grpc_server.h"

#include <glog/logging.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/tensor_encoding.h"

namespace convoy {
namespace {
// Room for a chunk's header fields around its payload.
constexpr int kMaxMessageBytes = static_cast<int>(kMaxChunkPayloadBytes) + 1024;
// Handler threads, and so concurrent RPCs, the server allows; each in-flight push holds one
// model-sized buffer, so this bounds the server's memory.
constexpr int kMaxHandlerThreads = 256;
// Concurrent streams one client connection may hold open (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS),
// so one misbehaving client cannot take every handler thread. An agent needs one at a time.
constexpr int kMaxStreamsPerConnection = 8;
}  // namespace

absl::StatusOr<std::unique_ptr<GrpcParameterServer>> GrpcParameterServer::Start(
    std::unique_ptr<ParameterServer> server, const std::string& address,
    const ServerSecurity& security, absl::Duration stream_idle_timeout) {
  CONVOY_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> credentials,
                          MakeServerCredentials(security));
  std::unique_ptr<GrpcParameterServer> self(new GrpcParameterServer());
  self->core_ = std::move(server);
  ParameterServer* core = self->core_.get();
  self->service_ =
      std::make_unique<ParameterServerService>(core, security.auth_token, stream_idle_timeout);
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
  quota.SetMaxThreads(kMaxHandlerThreads);
  builder.SetResourceQuota(quota);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, kMaxStreamsPerConnection);
  // No SO_REUSEPORT: a second server on the same port (a stale PS still running, or another process
  // that took the port while this one restarted) must fail to start, not silently take half the
  // agents.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
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

}  // namespace convoy
