#include "param_server/service/push_reactor.h"

#include <glog/logging.h>

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/wire/grpc_status.h"

namespace convoy::ps {

ParameterServerService::PushReactor::PushReactor(ParameterServerService* service,
                                                 grpc::CallbackServerContext* context,
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
    ticket =
        service_->buffers_.Acquire([this](std::vector<float> buffer) { Start(std::move(buffer)); });
    if (ticket.verdict == Admission::Verdict::kWaiting) wait_ticket_ = ticket.id;
  }
  if (ticket.verdict == Admission::Verdict::kNow) {
    Start(std::move(ticket.buffer));
  } else if (ticket.verdict == Admission::Verdict::kRefused) {
    const absl::Duration after = service_->options_.busy_retry_after;
    context_->AddTrailingMetadata(kRetryPushbackKey,
                                  absl::StrCat(absl::ToInt64Milliseconds(after)));
    Reject(v1::REJECT_REASON_SERVER_BUSY,
           absl::ResourceExhaustedError(
               absl::StrCat("parameter server busy: all ", service_->buffers_.capacity(),
                            " push buffers are in use and ", service_->options_.max_waiting_pushes,
                            " pushes wait for one; nothing was read or applied, retry after ",
                            absl::FormatDuration(after))));
  }
}

void ParameterServerService::PushReactor::OnReadDone(bool ok) {
  if (!ok) {
    EndOfStream();
    return;
  }
  service_->Touch(this);
  bytes_in_ += chunk_.wire_bytes();
  if (absl::Status s = assembler_->Add(chunk_.header(), chunk_.data()); !s.ok()) {
    Reject(assembler_->reason(), s);
    return;
  }
  StartRead(&chunk_);
}

void ParameterServerService::PushReactor::EndOfStream() {
  bool timed_out = false;
  {
    absl::MutexLock lock(&mu_);
    timed_out = timed_out_;
  }
  service_->Unwatch(this);
  if (!chunk_.parse_error().ok()) {
    Reject(v1::REJECT_REASON_BAD_CHUNKS,
           absl::InvalidArgumentError(absl::StrCat(
               "chunk ", assembler_->chunks(), " of the push: ", chunk_.parse_error().message())));
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

void ParameterServerService::PushReactor::OnCancel() {
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

void ParameterServerService::PushReactor::OnDone() {
  service_->Unwatch(this);
  if (assembler_.has_value()) {
    std::vector<float> buffer = assembler_->TakeBuffer();
    if (!buffer.empty()) service_->buffers_.Release(std::move(buffer));
  }
  delete this;
}

void ParameterServerService::PushReactor::TimeOut() {
  {
    absl::MutexLock lock(&mu_);
    timed_out_ = true;
  }
  context_->TryCancel();  // The pending read ends with ok=false; OnReadDone rejects.
}

void ParameterServerService::PushReactor::Start(std::vector<float> buffer) {
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

void ParameterServerService::PushReactor::Answer(const PushAnswer& outcome) {
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

void ParameterServerService::PushReactor::Decided() {
  if (!assembler_.has_value()) return;
  const PushHeader& header = assembler_->header();
  if (header.sequence == 0 || header.agent_id.empty()) return;
  service_->followed_.Decided(
      FollowedPushes::Push{header.agent_id, header.push_session, header.sequence});
}

void ParameterServerService::PushReactor::Reject(v1::RejectReason reason,
                                                 const absl::Status& status) {
  const std::string agent_id = assembler_.has_value() ? assembler_->agent_id() : std::string();
  service_->server_->CountBytes(bytes_in_, 0);
  service_->server_->CountRejection(agent_id, reason);
  VLOG(1) << "push from '" << agent_id << "' rejected: " << status;
  FinishOnce(ToGrpcStatus(status));
}

void ParameterServerService::PushReactor::FinishOnce(const grpc::Status& status) {
  {
    absl::MutexLock lock(&mu_);
    if (finished_) return;
    finished_ = true;
  }
  service_->Unwatch(this);
  Decided();
  Finish(status);
}

}  // namespace convoy::ps
