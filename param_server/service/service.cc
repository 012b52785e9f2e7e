#include "param_server/service/service.h"

#include <glog/logging.h>
#include <grpcpp/impl/rpc_service_method.h>
#include <grpcpp/support/server_callback.h>

#include <algorithm>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/wire/grpc_status.h"
#include "common/wire/security.h"
#include "common/wire/tensor_encoding.h"
#include "common/wire/wire_encoding.h"
#include "convoy/v1/parameter_server.grpc.pb.h"
#include "param_server/core/push_assembler.h"

namespace convoy::ps {

uint32_t PushBuffersFor(const ServiceOptions& options, uint32_t max_pushes_per_step) {
  if (options.push_buffers > 0) return options.push_buffers;
  return 2 * std::max<uint32_t>(max_pushes_per_step, 1) + 4;
}

uint32_t ConcurrentPullsFor(const ServiceOptions& options, uint32_t max_pushes_per_step) {
  if (options.concurrent_pulls > 0) return options.concurrent_pulls;
  return PushBuffersFor(ServiceOptions(), max_pushes_per_step);
}

// One PushGradients call: waits for a receive buffer, reads the stream into it chunk by chunk,
// hands the push to the core's apply worker and answers when the worker has decided it. It holds
// no thread while it waits. Deletes itself once gRPC is done with the call (OnDone).
class ParameterServerService::PushReactor final
    : public grpc::ServerReadReactor<IncomingChunk<v1::GradientChunk>> {
 public:
  PushReactor(ParameterServerService* service, grpc::CallbackServerContext* context,
              v1::PushResponse* response)
      : service_(service), context_(context), response_(response) {
    if (grpc::Status s = service_->Authorize(*context_); !s.ok()) {
      FinishOnce(s);
      return;
    }
    if (service_->draining_.load()) {
      Reject(v1::REJECT_REASON_SHUTTING_DOWN,
             absl::UnavailableError("parameter server is shutting down"));
      return;
    }
    PushBufferPool::Ticket ticket;
    {
      // Held across Acquire, so that a buffer handed over at once (Start, on the releasing thread)
      // finds the ticket recorded.
      absl::MutexLock lock(&mu_);
      ticket = service_->buffers_.Acquire(
          [this](std::vector<float> buffer) { Start(std::move(buffer)); });
      if (ticket.verdict == Admission::Verdict::kWaiting) wait_ticket_ = ticket.id;
    }
    if (ticket.verdict == Admission::Verdict::kNow) {
      Start(std::move(ticket.buffer));
    } else if (ticket.verdict == Admission::Verdict::kRefused) {
      const absl::Duration after = service_->options_.busy_retry_after;
      context_->AddTrailingMetadata(kRetryPushbackKey,
                                    absl::StrCat(absl::ToInt64Milliseconds(after)));
      Reject(v1::REJECT_REASON_SERVER_BUSY,
             absl::ResourceExhaustedError(absl::StrCat(
                 "parameter server busy: all ", service_->buffers_.capacity(),
                 " push buffers are in use and ", service_->options_.max_waiting_pushes,
                 " pushes wait for one; nothing was read or applied, retry after ",
                 absl::FormatDuration(after))));
    }
  }

  void OnReadDone(bool ok) override {
    if (ok) {
      service_->Touch(this);
      bytes_in_ += chunk_.wire_bytes();
      if (absl::Status s = assembler_->Add(chunk_.header(), chunk_.data()); !s.ok()) {
        Reject(assembler_->reason(), s);
        return;
      }
      StartRead(&chunk_);
      return;
    }
    // The stream ended: a half-close after the last chunk, or a broken stream.
    bool timed_out = false;
    {
      absl::MutexLock lock(&mu_);
      timed_out = timed_out_;
    }
    service_->Unwatch(this);
    if (!chunk_.parse_error().ok()) {
      Reject(v1::REJECT_REASON_BAD_CHUNKS, absl::InvalidArgumentError(absl::StrCat(
                                               "chunk ", assembler_->chunks(),
                                               " of the push: ", chunk_.parse_error().message())));
      return;
    }
    if (timed_out) {
      Reject(v1::REJECT_REASON_CANCELLED,
             absl::DeadlineExceededError(
                 absl::StrCat("push stream sent no chunk for ",
                              absl::FormatDuration(service_->options_.stream_idle_timeout),
                              "; cancelled, nothing applied")));
      return;
    }
    if (context_->IsCancelled()) {
      Reject(v1::REJECT_REASON_CANCELLED,
             absl::CancelledError("push stream cancelled before it completed; nothing applied"));
      return;
    }
    if (absl::Status s = assembler_->Finish(); !s.ok()) {
      Reject(assembler_->reason(), s);
      return;
    }
    if (service_->draining_.load()) {
      Reject(v1::REJECT_REASON_SHUTTING_DOWN,
             absl::UnavailableError("parameter server is shutting down"));
      return;
    }
    // Answered on the apply worker once the batch that holds this push is decided.
    service_->server_->Submit(assembler_->header(), assembler_->TakeBuffer(),
                              [this](const PushAnswer& outcome, std::vector<float> buffer) {
                                service_->buffers_.Release(std::move(buffer));
                                Answer(outcome);
                              });
  }

  void OnCancel() override {
    uint64_t ticket = 0;
    {
      absl::MutexLock lock(&mu_);
      cancelled_ = true;
      ticket = wait_ticket_;
    }
    // A push still waiting for a buffer has no read to end it: end it here, unless the buffer is on
    // its way (Start then sees the cancellation).
    if (ticket != 0 && service_->buffers_.CancelWait(ticket)) {
      Reject(v1::REJECT_REASON_CANCELLED,
             absl::CancelledError("push cancelled while it waited for a buffer; nothing read"));
    }
  }

  void OnDone() override {
    service_->Unwatch(this);
    if (assembler_.has_value()) {
      std::vector<float> buffer = assembler_->TakeBuffer();
      if (!buffer.empty()) service_->buffers_.Release(std::move(buffer));
    }
    delete this;
  }

  // The watchdog's verdict: no chunk for too long. Called under the service's streams lock, before
  // this reactor is unwatched, so the context is alive.
  void TimeOut() {
    {
      absl::MutexLock lock(&mu_);
      timed_out_ = true;
    }
    context_->TryCancel();  // The pending read ends with ok=false; OnReadDone rejects.
  }

 private:
  // With its buffer: starts reading, unless the call was cancelled while it waited.
  void Start(std::vector<float> buffer) {
    bool cancelled = false;
    {
      absl::MutexLock lock(&mu_);
      wait_ticket_ = 0;
      cancelled = cancelled_;
    }
    const ModelInfo& model = service_->server_->model();
    assembler_.emplace(model.fingerprint, model.parameter_count, std::move(buffer));
    if (cancelled) {
      Reject(v1::REJECT_REASON_CANCELLED,
             absl::CancelledError("push cancelled while it waited for a buffer; nothing read"));
      return;
    }
    service_->Watch(this);
    StartRead(&chunk_);
  }

  void Answer(const PushAnswer& outcome) {
    if (grpc::Status replaced = service_->AfterApply(outcome); !replaced.ok()) {
      FinishOnce(replaced);
      return;
    }
    v1::PushResponse& response = *response_;
    ToResponse(outcome, &response);
    const PushHeader& header = assembler_->header();
    if (outcome.repeated) {
      response.set_message(
          outcome.reason == v1::REJECT_REASON_SUPERSEDED
              ? "a late repeat of a push older than this session's newest; nothing applied"
              : "a repeat of a push already answered: its first answer, nothing applied again");
    } else if (outcome.reason == v1::REJECT_REASON_BASE_NOT_IN_LINEAGE) {
      response.set_message(absl::StrCat(
          "base version ", header.base_version, " of incarnation ", header.base_incarnation,
          " is not a version this server's weights descend from (they hold ",
          service_->server_->lineage().Describe(),
          "): it was applied after that server start's last checkpoint and lost with it, or is "
          "another run's; pull, then push again"));
    } else if (outcome.reason == v1::REJECT_REASON_STALE) {
      response.set_message(absl::StrCat("gradient is ", outcome.staleness,
                                        " versions old, over --max_staleness; pull and recompute"));
    } else if (outcome.reason == v1::REJECT_REASON_AHEAD) {
      response.set_message(absl::StrCat("base_version ", header.base_version,
                                        " is ahead of the server's ", outcome.version,
                                        " (restarted from a checkpoint); pull and recompute"));
    }
    service_->server_->CountBytes(bytes_in_, response.ByteSizeLong());
    FinishOnce(grpc::Status::OK);
  }

  // A pull that follows this push may go now: it is decided, and when applied, the step's weights
  // are published. Before Finish, after which the reactor may be gone.
  void Decided() {
    if (!assembler_.has_value()) return;
    const PushHeader& header = assembler_->header();
    if (header.sequence == 0 || header.agent_id.empty()) return;
    service_->followed_.Decided(
        FollowedPushes::Push{header.agent_id, header.push_session, header.sequence});
  }

  void Reject(v1::RejectReason reason, const absl::Status& status) {
    const std::string agent_id = assembler_.has_value() ? assembler_->agent_id() : std::string();
    service_->server_->CountBytes(bytes_in_, 0);
    service_->server_->CountRejection(agent_id, reason);
    VLOG(1) << "push from '" << agent_id << "' rejected: " << status;
    FinishOnce(ToGrpcStatus(status));
  }

  void FinishOnce(const grpc::Status& status) {
    {
      absl::MutexLock lock(&mu_);
      if (finished_) return;
      finished_ = true;
    }
    service_->Unwatch(this);
    Decided();
    Finish(status);
  }

  ParameterServerService* const service_;
  grpc::CallbackServerContext* const context_;
  v1::PushResponse* const response_;
  // Touched by gRPC's reactions one at a time, and by the apply worker only after the last of them.
  std::optional<PushAssembler> assembler_;
  IncomingChunk<v1::GradientChunk> chunk_;
  uint64_t bytes_in_ = 0;
  // What the buffer pool, the watchdog and a cancellation may change from other threads.
  absl::Mutex mu_;
  uint64_t wait_ticket_ ABSL_GUARDED_BY(mu_) = 0;  // Waiting for a buffer under this id.
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool timed_out_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

// One PullWeights call: once the push it follows is decided (if it names one), and once admitted
// (at most ServiceOptions::concurrent_pulls write at once), writes the newest version's serialized
// chunks (pull_cache.h) one after another. Deletes itself once gRPC is done with the call (OnDone).
class ParameterServerService::PullReactor final
    : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  PullReactor(ParameterServerService* service, grpc::CallbackServerContext* context,
              const v1::PullRequest* request)
      : service_(service), context_(context) {
    if (grpc::Status s = service_->Authorize(*context_); !s.ok()) {
      FinishOnce(s);
      return;
    }
    agent_id_ = request->agent_id();
    request_bytes_ = request->ByteSizeLong();
    network_ = request->network();
    const absl::StatusOr<TensorEncoding> requested =
        FromWireEncoding(request->encoding(), UnspecifiedEncoding::kFp32);
    if (!requested.ok()) {
      FinishOnce(ToGrpcStatus(requested.status()));
      return;
    }
    encoding_ = *requested;
    if (network_ != v1::NETWORK_ONLINE && network_ != v1::NETWORK_TARGET &&
        network_ != v1::NETWORK_AVERAGE) {
      FinishOnce(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                              absl::StrCat("unknown network ", static_cast<int>(network_))));
      return;
    }
    have_version_ = request->have_version();
    have_incarnation_ = request->have_incarnation();
    if (request->after_sequence() != 0) {
      if (agent_id_.empty()) {
        FinishOnce(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                "a pull that follows a push (after_sequence) must name its "
                                "agent_id"));
        return;
      }
      // Held across Await, so that a push decided at once (Proceed, on the deciding thread) finds
      // the wait recorded.
      absl::MutexLock lock(&mu_);
      follow_ticket_ = service_->followed_.Await(
          FollowedPushes::Push{agent_id_, request->after_push_session(), request->after_sequence()},
          [this] { Proceed(); });
      if (follow_ticket_ != 0) return;
    }
    Proceed();
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      service_->server_->CountBytes(request_bytes_, bytes_out_);
      FinishOnce(grpc::Status(grpc::StatusCode::CANCELLED, "client stopped reading the pull"));
      return;
    }
    WriteNext();
  }

  void OnCancel() override {
    uint64_t ticket = 0;
    uint64_t follow = 0;
    {
      absl::MutexLock lock(&mu_);
      cancelled_ = true;
      ticket = wait_ticket_;
      follow = follow_ticket_;
    }
    if (follow != 0 && service_->followed_.Cancel(follow)) {
      FinishOnce(grpc::Status(grpc::StatusCode::CANCELLED,
                              "pull cancelled while it waited for the push it follows"));
      return;
    }
    if (ticket != 0 && service_->pulls_.CancelWait(ticket)) {
      FinishOnce(
          grpc::Status(grpc::StatusCode::CANCELLED, "pull cancelled while it waited for its turn"));
    }
  }

  void OnDone() override {
    if (admitted_) service_->pulls_.Release();  // Every byte is sent: the next pull's turn.
    delete this;
  }

 private:
  // Once the push it follows is decided (at once for a pull that follows none): the newest
  // weights, or that the caller holds them, or its turn to be sent.
  void Proceed() {
    bool cancelled = false;
    {
      absl::MutexLock lock(&mu_);
      follow_ticket_ = 0;
      cancelled = cancelled_;
    }
    if (cancelled) {
      FinishOnce(grpc::Status(grpc::StatusCode::CANCELLED, "pull cancelled by the client"));
      return;
    }
    ParameterServer& server = *service_->server_;
    // The averaged network is pulled rarely (to evaluate it): folded first, it is as of the newest
    // version.
    if (network_ == v1::NETWORK_AVERAGE) server.FoldAverage();
    std::shared_ptr<const WeightSnapshot> snapshot = server.Snapshot(network_);
    if (snapshot == nullptr) {
      FinishOnce(grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                              "this server keeps no averaged network: it runs with "
                              "--average_horizon=0"));
      return;
    }
    if (have_version_ == snapshot->version && have_incarnation_ == server.incarnation()) {
      // A few bytes: answered at once, without a turn.
      OutgoingChunk<v1::WeightChunk> chunk;
      chunk.header.set_version(snapshot->version);
      chunk.header.set_total_elements(snapshot->values.size());
      chunk.header.set_encoding(ToWireEncoding(encoding_));
      chunk.header.set_network(network_);
      chunk.header.set_incarnation(server.incarnation());
      chunk.header.set_not_newer(true);
      bool own = false;
      (void)grpc::SerializationTraits<OutgoingChunk<v1::WeightChunk>>::Serialize(chunk, &single_,
                                                                                 &own);
      server.CountBytes(request_bytes_, single_.Length());
      server.CountPull(agent_id_, /*not_newer=*/true);
      StartWriteAndFinish(&single_, grpc::WriteOptions(), grpc::Status::OK);
      return;
    }
    Admission::Ticket ticket;
    {
      absl::MutexLock lock(&mu_);
      ticket = service_->pulls_.Acquire([this] { Start(); });
      if (ticket.verdict == Admission::Verdict::kWaiting) wait_ticket_ = ticket.id;
    }
    if (ticket.verdict == Admission::Verdict::kNow) {
      Start();
    } else if (ticket.verdict == Admission::Verdict::kRefused) {
      const absl::Duration after = service_->options_.busy_retry_after;
      context_->AddTrailingMetadata(kRetryPushbackKey,
                                    absl::StrCat(absl::ToInt64Milliseconds(after)));
      FinishOnce(grpc::Status(
          grpc::StatusCode::RESOURCE_EXHAUSTED,
          absl::StrCat("parameter server busy: ", service_->pulls_.slots(),
                       " pulls are being sent and ", service_->pulls_.max_waiting(),
                       " wait for their turn; retry after ", absl::FormatDuration(after))));
    }
  }

  // Its turn: the newest snapshot now (a pull that waited gets the weights of when it is sent).
  void Start() {
    bool cancelled = false;
    {
      absl::MutexLock lock(&mu_);
      wait_ticket_ = 0;
      cancelled = cancelled_;
    }
    admitted_ = true;
    if (cancelled) {
      FinishOnce(
          grpc::Status(grpc::StatusCode::CANCELLED, "pull cancelled while it waited for its turn"));
      return;
    }
    ParameterServer& server = *service_->server_;
    pull_ = service_->pull_cache_.Get(server.Snapshot(network_), network_, encoding_,
                                      server.incarnation());
    WriteNext();
  }

  // Writes the next chunk; the last goes out with the status (no OnWriteDone follows it), counted
  // first, so that a client that has its answer sees the pull counted.
  void WriteNext() {
    if (context_->IsCancelled()) {
      service_->server_->CountBytes(request_bytes_, bytes_out_);
      FinishOnce(grpc::Status(grpc::StatusCode::CANCELLED, "pull cancelled by the client"));
      return;
    }
    const grpc::ByteBuffer& chunk = pull_->chunks[next_++];
    bytes_out_ += chunk.Length();
    if (next_ < pull_->chunks.size()) {
      StartWrite(&chunk);
      return;
    }
    ParameterServer& server = *service_->server_;
    server.CountBytes(request_bytes_, bytes_out_);
    server.CountPull(agent_id_, /*not_newer=*/false);
    {
      absl::MutexLock lock(&mu_);
      finished_ = true;
    }
    StartWriteAndFinish(&chunk, grpc::WriteOptions(), grpc::Status::OK);
  }

  void FinishOnce(const grpc::Status& status) {
    {
      absl::MutexLock lock(&mu_);
      if (finished_) return;
      finished_ = true;
    }
    Finish(status);
  }

  ParameterServerService* const service_;
  grpc::CallbackServerContext* const context_;
  std::string agent_id_;
  uint64_t request_bytes_ = 0;
  v1::Network network_ = v1::NETWORK_ONLINE;
  TensorEncoding encoding_ = TensorEncoding::kFp32;
  uint64_t bytes_out_ = 0;
  grpc::ByteBuffer single_;  // The not-newer answer.
  // Set when admitted (before any write), read in OnDone, which follows every reaction.
  bool admitted_ = false;
  std::shared_ptr<const SerializedPull> pull_;
  size_t next_ = 0;
  uint64_t have_version_ = 0;
  uint64_t have_incarnation_ = 0;
  // What the admission, the push it follows and a cancellation may change from other threads.
  absl::Mutex mu_;
  uint64_t wait_ticket_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t follow_ticket_ ABSL_GUARDED_BY(mu_) = 0;  // Waiting for its push under this id.
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

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
