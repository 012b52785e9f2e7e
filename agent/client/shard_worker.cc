#include "agent/client/shard_worker.h"

#include <glog/logging.h>

#include <utility>

namespace convoy::agent {

ShardWorker::ShardWorker() : thread_([this] { Loop(); }) {}

ShardWorker::~ShardWorker() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

void ShardWorker::Start(std::function<void()> job) {
  absl::MutexLock lock(&mu_);
  CHECK(!busy_) << "a call to this parameter server is already in flight";
  busy_ = true;
  job_ = std::move(job);
}

bool ShardWorker::busy() const {
  absl::MutexLock lock(&mu_);
  return busy_;
}

bool ShardWorker::Wait(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithDeadline(absl::Condition(
                                   +[](bool* busy) { return !*busy; }, &busy_),
                               deadline);
}

void ShardWorker::Loop() {
  while (true) {
    std::function<void()> job;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](ShardWorker* w)
               ABSL_EXCLUSIVE_LOCKS_REQUIRED(w->mu_) { return w->job_ != nullptr || w->stopping_; },
          this));
      if (job_ == nullptr) return;  // Stopping, nothing left to do.
      job = std::move(job_);
      job_ = nullptr;
    }
    job();
    absl::MutexLock lock(&mu_);
    busy_ = false;
  }
}

}  // namespace convoy::agent
