#include "param_server/service.h"

#include <glog/logging.h>

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/security.h"
#include "common/tensor_encoding.h"
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
                                                 grpc::ServerWriter<v1::WeightChunk>* writer) {
  if (grpc::Status s = Authorize(*context); !s.ok()) return s;
  TensorEncoding encoding;
  switch (request->encoding()) {
    case v1::ENCODING_UNSPECIFIED:
    case v1::ENCODING_FP32:
      encoding = TensorEncoding::kFp32;
      break;
    case v1::ENCODING_BF16:
      encoding = TensorEncoding::kBf16;
      break;
    default:
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          absl::StrCat("unknown encoding ", static_cast<int>(request->encoding())));
  }
  if (request->network() != v1::NETWORK_ONLINE && request->network() != v1::NETWORK_TARGET) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("unknown network ", static_cast<int>(request->network())));
  }
  const std::shared_ptr<const WeightSnapshot> snapshot = server_->Snapshot(request->network());
  v1::WeightChunk chunk;
  chunk.set_version(snapshot->version);
  chunk.set_total_elements(snapshot->values.size());
  chunk.set_encoding(encoding == TensorEncoding::kBf16 ? v1::ENCODING_BF16 : v1::ENCODING_FP32);
  chunk.set_network(request->network());
  chunk.set_incarnation(server_->incarnation());
  if (request->have_version() == snapshot->version &&
      request->have_incarnation() == server_->incarnation()) {
    chunk.set_not_newer(true);
    server_->CountPull(request->agent_id(), /*not_newer=*/true);
    server_->CountBytes(request->ByteSizeLong(), chunk.ByteSizeLong());
    writer->Write(chunk);
    return grpc::Status::OK;
  }
  const size_t per_chunk = ElementsPerChunk(encoding);
  const size_t total = snapshot->values.size();
  uint64_t bytes_out = 0;
  std::string* data = chunk.mutable_data();
  data->reserve(per_chunk * BytesPerElement(encoding));
  for (size_t offset = 0; offset < total; offset += per_chunk) {
    if (context->IsCancelled()) {
      return grpc::Status(grpc::StatusCode::CANCELLED, "pull cancelled by the client");
    }
    const size_t count = std::min(per_chunk, total - offset);
    chunk.set_offset(offset);
    data->clear();
    EncodeTensor(snapshot->values.data() + offset, count, encoding, data);
    bytes_out += chunk.ByteSizeLong();
    if (!writer->Write(chunk)) {
      return grpc::Status(grpc::StatusCode::CANCELLED, "client stopped reading the pull");
    }
  }
  server_->CountBytes(request->ByteSizeLong(), bytes_out);
  server_->CountPull(request->agent_id(), /*not_newer=*/false);
  return grpc::Status::OK;
}

grpc::Status ParameterServerService::PushGradients(grpc::ServerContext* context,
                                                   grpc::ServerReader<v1::GradientChunk>* reader,
                                                   v1::PushResponse* response) {
  if (grpc::Status s = Authorize(*context); !s.ok()) return s;
  PushAssembler assembler(server_->model().fingerprint, server_->model().parameter_count);
  v1::GradientChunk chunk;
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
    bytes_in += chunk.ByteSizeLong();
    if (absl::Status s = assembler.Add(chunk); !s.ok()) return reject(assembler.reason(), s);
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
  response->set_incarnation(server_->incarnation());
  response->set_repeated(outcome.repeated);
  if (outcome.repeated) {
    response->set_message(
        outcome.reason == v1::REJECT_REASON_SUPERSEDED
            ? "a late repeat of a push older than this session's newest; nothing applied"
            : "a repeat of a push already answered: its first answer, nothing applied again");
  } else if (outcome.reason == v1::REJECT_REASON_WRONG_INCARNATION) {
    response->set_message(absl::StrCat(
        "base_incarnation ", assembler.header().base_incarnation, " is not this server's ",
        server_->incarnation(), " (the server restarted); pull, then push again"));
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
