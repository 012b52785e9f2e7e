#include "param_server/core/checkpoint_trigger.h"

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "tests/catch.h"

namespace convoy::ps {
namespace {

// A step that applied `pushes` pushes.
AppliedStep StepOf(size_t pushes) {
  AppliedStep step;
  step.pushes.resize(pushes);
  return step;
}

TEST_CASE("With both triggers off the trigger is disabled and starts no checkpoint task",
          "[checkpoint]") {
  CheckpointTrigger trigger(/*every_updates=*/0, /*every=*/absl::ZeroDuration());
  CHECK_FALSE(trigger.enabled());
  trigger.Start([] { FAIL("no checkpoint without a trigger"); });
  for (int i = 0; i < 5; ++i) trigger.AfterApply(StepOf(1));
  trigger.Stop();
}

TEST_CASE("Updates applied before the start count toward the first periodic checkpoint",
          "[checkpoint]") {
  CheckpointTrigger trigger(/*every_updates=*/2, /*every=*/absl::ZeroDuration());
  REQUIRE(trigger.enabled());
  trigger.AfterApply(StepOf(1));
  trigger.AfterApply(StepOf(1));
  absl::Notification checkpointed;
  trigger.Start([&] { checkpointed.Notify(); });
  checkpointed.WaitForNotification();
  trigger.Stop();
}

TEST_CASE("A periodic checkpoint follows every checkpoint_every_updates applied updates",
          "[checkpoint]") {
  CheckpointTrigger trigger(/*every_updates=*/3, /*every=*/absl::ZeroDuration());
  absl::Mutex mu;
  int checkpoints = 0;
  trigger.Start([&] {
    absl::MutexLock lock(&mu);
    ++checkpoints;
  });
  for (int i = 0; i < 6; ++i) {
    trigger.AfterApply(StepOf(1));
    if (i == 2) {
      absl::MutexLock lock(&mu);
      mu.Await(absl::Condition(
          +[](int* n) { return *n >= 1; }, &checkpoints));
    }
  }
  {
    absl::MutexLock lock(&mu);
    mu.Await(absl::Condition(
        +[](int* n) { return *n >= 2; }, &checkpoints));
    CHECK(checkpoints == 2);
  }
  trigger.Stop();
}

TEST_CASE("A step that combined several pushes counts each of them toward the periodic checkpoint",
          "[checkpoint]") {
  CheckpointTrigger trigger(/*every_updates=*/4, /*every=*/absl::ZeroDuration());
  trigger.AfterApply(StepOf(3));
  absl::Notification checkpointed;
  trigger.Start([&] { checkpointed.Notify(); });
  CHECK_FALSE(checkpointed.WaitForNotificationWithTimeout(absl::Milliseconds(200)));
  trigger.AfterApply(StepOf(1));  // The fourth push.
  checkpointed.WaitForNotification();
  trigger.Stop();
}

}  // namespace
}  // namespace convoy::ps
