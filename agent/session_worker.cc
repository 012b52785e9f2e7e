#include "agent/session_worker.h"

#include <glog/logging.h>

#include <utility>

#include "absl/time/clock.h"

namespace convoy {

SessionWorker::SessionWorker(ParameterServerSession* session)
    : session_(session), thread_([this] { Loop(); }) {}

SessionWorker::~SessionWorker() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

void SessionWorker::Start(std::unique_ptr<Exchange> exchange) {
  absl::MutexLock lock(&mu_);
  CHECK(!busy_) << "an exchange with the parameter server is already in flight";
  busy_ = true;
  started_ = absl::Now();
  pending_ = std::move(exchange);
}

bool SessionWorker::busy() const {
  absl::MutexLock lock(&mu_);
  return busy_;
}

absl::Time SessionWorker::started() const {
  absl::MutexLock lock(&mu_);
  return started_;
}

std::unique_ptr<Exchange> SessionWorker::TakeFinished() {
  absl::MutexLock lock(&mu_);
  if (finished_ != nullptr) busy_ = false;
  return std::move(finished_);
}

std::unique_ptr<Exchange> SessionWorker::WaitFinished(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  if (!busy_) return nullptr;
  if (!mu_.AwaitWithDeadline(
          absl::Condition(
              +[](std::unique_ptr<Exchange>* finished) { return *finished != nullptr; },
              &finished_),
          deadline)) {
    return nullptr;
  }
  busy_ = false;
  return std::move(finished_);
}

void SessionWorker::Loop() {
  while (true) {
    std::unique_ptr<Exchange> exchange;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](SessionWorker* w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(w->mu_) {
            return w->pending_ != nullptr || w->stopping_;
          },
          this));
      if (pending_ == nullptr) return;  // Stopping, nothing left to do.
      exchange = std::move(pending_);
    }
    Perform(exchange.get());
    absl::MutexLock lock(&mu_);
    finished_ = std::move(exchange);
  }
}

void SessionWorker::Perform(Exchange* e) {
  bool answered = true;  // Nothing to push counts as answered.
  switch (e->kind) {
    case Exchange::Kind::kRejoin:
      e->rejoined = session_->Rejoin(e->pace);
      answered = false;  // A rejoin pulls in the catch-up that follows it.
      break;
    case Exchange::Kind::kSync:
    case Exchange::Kind::kCatchUp:
      if (e->minibatches > 0) {
        const absl::Time start = absl::Now();
        e->pushed = session_->Push(e->values, e->minibatches);
        e->push_time = absl::Now() - start;
        answered = e->pushed->ok();
      }
      break;
  }
  if (answered) {
    if (e->kind == Exchange::Kind::kCatchUp) session_->Reconnected();
    const absl::Time start = absl::Now();
    e->pulled = session_->Pull(&e->online, &e->target);
    e->pull_time = absl::Now() - start;
  }
  e->connected = session_->connected();
  e->has_pending_push = session_->has_pending_push();
  e->version = session_->version();
  e->incarnation = session_->incarnation();
}

}  // namespace convoy
