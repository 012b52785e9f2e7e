#include "common/support/periodic_task.h"

#include <glog/logging.h>

#include <exception>
#include <utility>

#include "absl/time/clock.h"

namespace convoy {

PeriodicTask::PeriodicTask(std::string name, absl::Duration period, std::function<void()> callback)
    : name_(std::move(name)), period_(period), callback_(std::move(callback)) {
  CHECK_GT(period_, absl::ZeroDuration())
      << "periodic task " << name_ << " needs a positive period";
  CHECK(callback_ != nullptr) << "periodic task " << name_ << " has no callback";
  absl::MutexLock lock(&join_mu_);
  thread_ = std::thread([this] { Loop(); });
  thread_id_ = thread_.get_id();
}

PeriodicTask::~PeriodicTask() { Stop(); }

void PeriodicTask::Wake() {
  absl::MutexLock lock(&mu_);
  woken_ = true;
}

bool PeriodicTask::stop_requested() const {
  absl::MutexLock lock(&mu_);
  return stopping_;
}

void PeriodicTask::Stop() {
  CHECK(std::this_thread::get_id() != thread_id_)
      << "periodic task " << name_ << ": Stop() called from its own callback";
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  absl::MutexLock lock(&join_mu_);
  if (thread_.joinable()) thread_.join();
}

void PeriodicTask::Loop() {
  // Time + InfiniteDuration is InfiniteFuture: the wait below then ends only on a wake or a stop.
  absl::Time next = absl::Now() + period_;
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      auto woken = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return woken_ || stopping_; };
      mu_.AwaitWithDeadline(absl::Condition(&woken), next);
      if (stopping_) return;
      woken_ = false;  // This run answers every wake so far.
    }
    RunOnce();
    next = absl::Now() + period_;
  }
}

void PeriodicTask::RunOnce() {
  try {
    callback_();
  } catch (const std::exception& e) {
    LOG(ERROR) << "periodic task " << name_ << ": the callback threw: " << e.what();
  } catch (...) {
    LOG(ERROR) << "periodic task " << name_ << ": the callback threw a non-standard exception";
  }
}

}  // namespace convoy
