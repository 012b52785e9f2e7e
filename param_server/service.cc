#include "param_server/service.h"

#include <glog/logging.h>
#include <grpcpp/impl/rpc_service_method.h>
#include <grpcpp/support/method_handler.h>

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/security.h"
#include "common/tensor_encoding.h"
#include "common/wire_encoding.h"
#include "convoy/v1/parameter_server.grpc.pb.h"
#include "param_server/push_assembler.h"

namespace convoy {

// Registers a push stream with the service's watchdog for its lifetime and records its progress.
class PushStreamWatch {
 public:
  PushStreamWatch(ParameterServerService* service, grpc::ServerContext* context)
      : service_(service), context_(context) {
    absl::MutexLock lock(&service_->streams_mu_);
    service_->streams_[context_] = {absl::Now(), false};
  }
  ~PushStreamWatch() {
    absl::MutexLock lock(&service_->streams_mu_);
    service_->streams_.erase(context_);
  }
  PushStreamWatch(const PushStreamWatch&) = delete;
  PushStreamWatch& operator=(const PushStreamWatch&) = delete;

  void Touch() {
    absl::MutexLock lock(&service_->streams_mu_);
    service_->streams_[context_].last_chunk = absl::Now();
  }
  bool timed_out() {
    absl::MutexLock lock(&service_->streams_mu_);
    return service_->streams_[context_].timed_out;
  }

 private:
  ParameterServerService* service_;
  grpc::ServerContext* context_;
};

ParameterServerService::ParameterServerService(ParameterServer* server, std::string auth_token,
                                               absl::Duration stream_idle_timeout)
    : server_(server),
      auth_token_(std::move(auth_token)),
      stream_idle_timeout_(stream_idle_timeout) {
  using grpc::internal::RpcMethod;
  using grpc::internal::RpcServiceMethod;
  using Self = ParameterServerService;
  const std::string prefix = absl::StrCat("/", v1::ParameterServer::service_full_name(), "/");
  method_names_ = {prefix + "Join", prefix + "PullWeights", prefix + "PushGradients",
                   prefix + "GetStatus"};
  AddMethod(new RpcServiceMethod(
      method_names_[0].c_str(), RpcMethod::NORMAL_RPC,
      new grpc::internal::RpcMethodHandler<Self, v1::JoinRequest, v1::JoinResponse>(
          [](Self* self, grpc::ServerContext* context, const v1::JoinRequest* request,
             v1::JoinResponse* response) { return self->Join(context, request, response); },
          this)));
  AddMethod(new RpcServiceMethod(
      method_names_[1].c_str(), RpcMethod::SERVER_STREAMING,
      new grpc::internal::ServerStreamingHandler<Self, v1::PullRequest,
                                                 OutgoingChunk<v1::WeightChunk>>(
          [](Self* self, grpc::ServerContext* context, const v1::PullRequest* request,
             grpc::ServerWriter<OutgoingChunk<v1::WeightChunk>>* writer) {
            return self->PullWeights(context, request, writer);
          },
          this)));
  AddMethod(new RpcServiceMethod(
      method_names_[2].c_str(), RpcMethod::CLIENT_STREAMING,
      new grpc::internal::ClientStreamingHandler<Self, IncomingChunk<v1::GradientChunk>,
                                                 v1::PushResponse>(
          [](Self* self, grpc::ServerContext* context,
             grpc::ServerReader<IncomingChunk<v1::GradientChunk>>* reader,
             v1::PushResponse* response) { return self->PushGradients(context, reader, response); },
          this)));
  AddMethod(new RpcServiceMethod(
      method_names_[3].c_str(), RpcMethod::NORMAL_RPC,
      new grpc::internal::RpcMethodHandler<Self, v1::StatusRequest, v1::StatusResponse>(
          [](Self* self, grpc::ServerContext* context, const v1::StatusRequest* request,
             v1::StatusResponse* response) { return self->GetStatus(context, request, response); },
          this)));
  if (stream_idle_timeout_ > absl::ZeroDuration()) {
    // At least a nanosecond: a sub-nanosecond timeout's quarter rounds to zero.
    const absl::Duration check_every =
        std::clamp(stream_idle_timeout_ / 4, absl::Nanoseconds(1), absl::Seconds(1));
    watchdog_ = std::make_unique<PeriodicTask>("push stream watchdog", check_every,
                                               [this] { CancelIdleStreams(); });
  }
}

// Stops the watchdog first: it reads the streams and the timeout.
ParameterServerService::~ParameterServerService() { watchdog_.reset(); }

void ParameterServerService::CancelIdleStreams() {
  absl::MutexLock lock(&streams_mu_);
  const absl::Time now = absl::Now();
  for (auto& [context, state] : streams_) {
    if (!state.timed_out && now - state.last_chunk > stream_idle_timeout_) {
      state.timed_out = true;
      context->TryCancel();  // The handler's Read() returns false; it rejects and unregisters.
    }
  }
}

namespace {
// Enough for the pushes typically in flight at once; more than that allocate as before.
constexpr size_t kMaxFreePushBuffers = 8;
}  // namespace

std::vector<float> ParameterServerService::TakePushBuffer() {
  absl::MutexLock lock(&buffers_mu_);
  if (free_push_buffers_.empty()) return {};
  std::vector<float> buffer = std::move(free_push_buffers_.back());
  free_push_buffers_.pop_back();
  return buffer;
}

void ParameterServerService::ReturnPushBuffer(std::vector<float> buffer) {
  if (buffer.size() != server_->model().parameter_count) return;
  absl::MutexLock lock(&buffers_mu_);
  if (free_push_buffers_.size() < kMaxFreePushBuffers) free_push_buffers_.push_back(std::move(buffer));
}

grpc::Status ParameterServerService::Authorize(const grpc::ServerContext& context) {
  if (CallAuthorized(context, auth_token_)) return grpc::Status::OK;
  server_->CountUnauthenticated();
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "missing or wrong bearer token");
}

grpc::Status ParameterServerService::Join(grpc::ServerContext* context,
                                          const v1::JoinRequest* request,
                                          v1::JoinResponse* response) {
  if (grpc::Status s = Authorize(*context); !s.ok()) return s;
  absl::StatusOr<v1::JoinResponse> joined = server_->Join(*request);
  if (!joined.ok()) return ToGrpcStatus(joined.status());
  *response = *std::move(joined);
  return grpc::Status::OK;
}

grpc::Status ParameterServerService::PullWeights(grpc::ServerContext* context,
                                                 const v1::PullRequest* request,
                                                 grpc::ServerWriter<OutgoingChunk<v1::WeightChunk>>* writer) {
  if (grpc::Status s = Authorize(*context); !s.ok()) return s;
  const absl::StatusOr<TensorEncoding> requested =
      FromWireEncoding(request->encoding(), UnspecifiedEncoding::kFp32);
  if (!requested.ok()) return ToGrpcStatus(requested.status());
  const TensorEncoding encoding = *requested;
  if (request->network() != v1::NETWORK_ONLINE && request->network() != v1::NETWORK_TARGET &&
      request->network() != v1::NETWORK_AVERAGE) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("unknown network ", static_cast<int>(request->network())));
  }
  // The averaged network is pulled rarely (to evaluate it): folded first, it is as of the newest
  // version.
  if (request->network() == v1::NETWORK_AVERAGE) server_->FoldAverage();
  const std::shared_ptr<const WeightSnapshot> snapshot = server_->Snapshot(request->network());
  if (snapshot == nullptr) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "this server keeps no averaged network: it runs with --average_horizon=0");
  }
  OutgoingChunk<v1::WeightChunk> chunk;
  v1::WeightChunk& header = chunk.header;
  header.set_version(snapshot->version);
  header.set_total_elements(snapshot->values.size());
  header.set_encoding(ToWireEncoding(encoding));
  header.set_network(request->network());
  header.set_incarnation(server_->incarnation());
  if (request->have_version() == snapshot->version &&
      request->have_incarnation() == server_->incarnation()) {
    header.set_not_newer(true);
    server_->CountPull(request->agent_id(), /*not_newer=*/true);
    server_->CountBytes(request->ByteSizeLong(), chunk.ByteSize());
    writer->Write(chunk);
    return grpc::Status::OK;
  }
  // fp32 chunks go out as slices of the snapshot itself, which they keep alive until sent: the store
  // reuses a snapshot's buffer only once nothing holds it (weight_store.h).
  chunk.encoding = encoding;
  chunk.keep_alive = snapshot;
  const size_t per_chunk = ElementsPerChunk(encoding);
  const size_t total = snapshot->values.size();
  uint64_t bytes_out = 0;
  for (size_t offset = 0; offset < total; offset += per_chunk) {
    if (context->IsCancelled()) {
      return grpc::Status(grpc::StatusCode::CANCELLED, "pull cancelled by the client");
    }
    header.set_offset(offset);
    chunk.values = snapshot->values.data() + offset;
    chunk.count = std::min(per_chunk, total - offset);
    bytes_out += chunk.ByteSize();
    if (!writer->Write(chunk)) {
      return grpc::Status(grpc::StatusCode::CANCELLED, "client stopped reading the pull");
    }
  }
  server_->CountBytes(request->ByteSizeLong(), bytes_out);
  server_->CountPull(request->agent_id(), /*not_newer=*/false);
  return grpc::Status::OK;
}

grpc::Status ParameterServerService::PushGradients(grpc::ServerContext* context,
                                                   grpc::ServerReader<IncomingChunk<v1::GradientChunk>>* reader,
                                                   v1::PushResponse* response) {
  if (grpc::Status s = Authorize(*context); !s.ok()) return s;
  PushAssembler assembler(server_->model().fingerprint, server_->model().parameter_count,
                          TakePushBuffer());
  // Every way out of this handler hands the buffer back.
  struct GiveBack {
    ParameterServerService* service;
    PushAssembler* assembler;
    ~GiveBack() { service->ReturnPushBuffer(assembler->TakeBuffer()); }
  } give_back{this, &assembler};
  IncomingChunk<v1::GradientChunk> chunk;
  uint64_t bytes_in = 0;
  auto reject = [&](v1::RejectReason reason, const absl::Status& status) {
    server_->CountBytes(bytes_in, 0);
    server_->CountRejection(assembler.agent_id(), reason);
    VLOG(1) << "push from '" << assembler.agent_id() << "' rejected: " << status;
    return ToGrpcStatus(status);
  };
  if (draining_.load()) {
    return reject(v1::REJECT_REASON_SHUTTING_DOWN,
                  absl::UnavailableError("parameter server is shutting down"));
  }
  PushStreamWatch watch(this, context);
  while (reader->Read(&chunk)) {
    watch.Touch();
    bytes_in += chunk.wire_bytes();
    if (absl::Status s = assembler.Add(chunk.header(), chunk.data()); !s.ok()) {
      return reject(assembler.reason(), s);
    }
  }
  if (!chunk.parse_error().ok()) {
    return reject(v1::REJECT_REASON_BAD_CHUNKS,
                  absl::InvalidArgumentError(absl::StrCat(
                      "chunk ", assembler.chunks(), " of the push: ", chunk.parse_error().message())));
  }
  // Read() returning false means either a half-close after the last chunk, or a broken stream.
  if (watch.timed_out()) {
    return reject(v1::REJECT_REASON_CANCELLED,
                  absl::DeadlineExceededError(absl::StrCat(
                      "push stream sent no chunk for ", absl::FormatDuration(stream_idle_timeout_),
                      "; cancelled, nothing applied")));
  }
  if (context->IsCancelled()) {
    return reject(
        v1::REJECT_REASON_CANCELLED,
        absl::CancelledError("push stream cancelled before it completed; nothing applied"));
  }
  if (absl::Status s = assembler.Finish(); !s.ok()) return reject(assembler.reason(), s);
  if (draining_.load()) {
    return reject(v1::REJECT_REASON_SHUTTING_DOWN,
                  absl::UnavailableError("parameter server is shutting down"));
  }
  const PushOutcome outcome = server_->Apply(assembler.header(), assembler.values());
  if (has_hook_.load()) {
    absl::MutexLock lock(&hook_mu_);
    if (after_apply_) {
      if (grpc::Status replaced = after_apply_(outcome); !replaced.ok()) return replaced;
    }
  }
  response->set_accepted(outcome.accepted);
  response->set_reason(outcome.reason);
  response->set_version(outcome.version);
  response->set_staleness(outcome.staleness);
  response->set_epsilon(outcome.epsilon);
  response->set_target_version(outcome.target_version);
  response->set_incarnation(outcome.incarnation);
  response->set_repeated(outcome.repeated);
  if (outcome.repeated) {
    response->set_message(
        outcome.reason == v1::REJECT_REASON_SUPERSEDED
            ? "a late repeat of a push older than this session's newest; nothing applied"
            : "a repeat of a push already answered: its first answer, nothing applied again");
  } else if (outcome.reason == v1::REJECT_REASON_BASE_NOT_IN_LINEAGE) {
    response->set_message(absl::StrCat(
        "base version ", assembler.base_version(), " of incarnation ",
        assembler.header().base_incarnation,
        " is not a version this server's weights descend from (they hold ",
        server_->lineage().Describe(),
        "): it was applied after that server start's last checkpoint and lost with it, or is "
        "another run's; pull, then push again"));
  } else if (outcome.reason == v1::REJECT_REASON_STALE) {
    response->set_message(absl::StrCat("gradient is ", outcome.staleness,
                                       " versions old, over --max_staleness; pull and recompute"));
  } else if (outcome.reason == v1::REJECT_REASON_AHEAD) {
    response->set_message(absl::StrCat("base_version ", assembler.base_version(),
                                       " is ahead of the server's ", outcome.version,
                                       " (restarted from a checkpoint); pull and recompute"));
  }
  server_->CountBytes(bytes_in, response->ByteSizeLong());
  return grpc::Status::OK;
}

grpc::Status ParameterServerService::GetStatus(grpc::ServerContext* context,
                                               const v1::StatusRequest* request,
                                               v1::StatusResponse* response) {
  if (grpc::Status s = Authorize(*context); !s.ok()) return s;
  *response = server_->Status();
  return grpc::Status::OK;
}

}  // namespace convoy
