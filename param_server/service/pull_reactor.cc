#include "param_server/service/pull_reactor.h"

#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/wire/grpc_status.h"
#include "common/wire/tensor_chunk.h"
#include "common/wire/wire_encoding.h"

namespace convoy::ps {

ParameterServerService::PullReactor::PullReactor(ParameterServerService* service,
                                                 grpc::CallbackServerContext* context,
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

void ParameterServerService::PullReactor::OnWriteDone(bool ok) {
  if (!ok) {
    service_->server_->CountBytes(request_bytes_, bytes_out_);
    FinishOnce(grpc::Status(grpc::StatusCode::CANCELLED, "client stopped reading the pull"));
    return;
  }
  WriteNext();
}

void ParameterServerService::PullReactor::OnCancel() {
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

void ParameterServerService::PullReactor::OnDone() {
  if (admitted_) service_->pulls_.Release();  // Every byte is sent: the next pull's turn.
  delete this;
}

void ParameterServerService::PullReactor::Proceed() {
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
    AnswerNotNewer(*snapshot);
    return;
  }
  Admit();
}

void ParameterServerService::PullReactor::AnswerNotNewer(const WeightSnapshot& snapshot) {
  ParameterServer& server = *service_->server_;
  OutgoingChunk<v1::WeightChunk> chunk;
  chunk.header.set_version(snapshot.version);
  chunk.header.set_total_elements(snapshot.values.size());
  chunk.header.set_encoding(ToWireEncoding(encoding_));
  chunk.header.set_network(network_);
  chunk.header.set_incarnation(server.incarnation());
  chunk.header.set_not_newer(true);
  bool own = false;
  (void)grpc::SerializationTraits<OutgoingChunk<v1::WeightChunk>>::Serialize(chunk, &single_, &own);
  server.CountBytes(request_bytes_, single_.Length());
  server.CountPull(agent_id_, /*not_newer=*/true);
  StartWriteAndFinish(&single_, grpc::WriteOptions(), grpc::Status::OK);
}

void ParameterServerService::PullReactor::Admit() {
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

void ParameterServerService::PullReactor::Start() {
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

void ParameterServerService::PullReactor::WriteNext() {
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

void ParameterServerService::PullReactor::FinishOnce(const grpc::Status& status) {
  {
    absl::MutexLock lock(&mu_);
    if (finished_) return;
    finished_ = true;
  }
  Finish(status);
}

}  // namespace convoy::ps
