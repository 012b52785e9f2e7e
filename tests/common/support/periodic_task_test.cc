#include "common/support/periodic_task.h"

#include <atomic>
#include <chrono>
#include <future>
#include <stdexcept>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "tests/catch.h"
#include "tests/support/subprocess.h"

namespace convoy {
namespace {

using testing::WaitUntil;

// Long enough that a test passes only if something other than the period made the task act.
constexpr absl::Duration kNever = absl::Hours(1);
// Only ever reached when something is broken.
constexpr absl::Duration kPatience = absl::Seconds(30);

TEST_CASE("A periodic task runs its callback again and again", "[periodic_task]") {
  std::atomic<int> runs{0};
  PeriodicTask task("repeat", absl::Milliseconds(10), [&] { ++runs; });
  CHECK(WaitUntil([&] { return runs.load() >= 3; }, kPatience));
  CHECK(task.name() == "repeat");
  CHECK(task.period() == absl::Milliseconds(10));
}

TEST_CASE("Stop wakes a task waiting out a long period, which never ran", "[periodic_task]") {
  std::atomic<int> runs{0};
  PeriodicTask task("long", kNever, [&] { ++runs; });
  const absl::Time start = absl::Now();
  task.Stop();
  CHECK(absl::Now() - start < kPatience);
  CHECK(runs.load() == 0);
  CHECK(task.stop_requested());
  task.Stop();  // Idempotent.
}

TEST_CASE("Destroying a task waiting out a long period returns", "[periodic_task]") {
  std::future<void> destroyed =
      std::async(std::launch::async, [] { PeriodicTask task("destroyed", kNever, [] {}); });
  REQUIRE(destroyed.wait_for(std::chrono::seconds(30)) == std::future_status::ready);
}

TEST_CASE("Wake runs the callback before its period is up", "[periodic_task]") {
  std::atomic<int> runs{0};
  PeriodicTask task("woken", kNever, [&] { ++runs; });
  task.Wake();
  CHECK(WaitUntil([&] { return runs.load() == 1; }, kPatience));
  task.Wake();
  CHECK(WaitUntil([&] { return runs.load() == 2; }, kPatience));
}

TEST_CASE("With an infinite period the callback runs only when woken", "[periodic_task]") {
  std::atomic<int> runs{0};
  PeriodicTask task("on demand", absl::InfiniteDuration(), [&] { ++runs; });
  CHECK(runs.load() == 0);
  task.Wake();
  CHECK(WaitUntil([&] { return runs.load() == 1; }, kPatience));
}

TEST_CASE("Wakes during a run are coalesced into one more run right after it", "[periodic_task]") {
  std::atomic<int> runs{0};
  absl::Notification entered, release;
  PeriodicTask task("coalesced", kNever, [&] {
    if (++runs == 1) {
      entered.Notify();
      release.WaitForNotification();
    }
  });
  task.Wake();
  REQUIRE(entered.WaitForNotificationWithTimeout(kPatience));
  task.Wake();
  task.Wake();
  task.Wake();
  release.Notify();
  CHECK(WaitUntil([&] { return runs.load() == 2; }, kPatience));
  // A negative check: time passes to show that no third run follows the three coalesced wakes.
  absl::SleepFor(absl::Milliseconds(200));
  CHECK(runs.load() == 2);
}

TEST_CASE("Stop waits for the run in progress, and no run starts after it", "[periodic_task]") {
  std::atomic<int> runs{0};
  std::atomic<bool> finished{false};
  absl::Notification entered, release;
  PeriodicTask task("in progress", kNever, [&] {
    ++runs;
    entered.Notify();
    release.WaitForNotification();
    finished = true;
  });
  task.Wake();
  REQUIRE(entered.WaitForNotificationWithTimeout(kPatience));
  task.Wake();  // Asked for before Stop: still no second run once Stop has been called.
  std::atomic<bool> finished_when_stopped{false};
  std::thread stopper([&] {
    task.Stop();
    finished_when_stopped = finished.load();
  });
  REQUIRE(WaitUntil([&] { return task.stop_requested(); }, kPatience));
  release.Notify();
  stopper.join();
  CHECK(finished_when_stopped.load());
  task.Wake();
  CHECK(runs.load() == 1);
}

TEST_CASE("An exception from the callback is logged and the schedule goes on", "[periodic_task]") {
  std::atomic<int> runs{0};
  PeriodicTask task("throws", absl::Milliseconds(10), [&] {
    if (++runs == 1) throw std::runtime_error("first run fails");
  });
  CHECK(WaitUntil([&] { return runs.load() >= 2; }, kPatience));
}

TEST_CASE("A callback may wake its own task for another run", "[periodic_task]") {
  std::atomic<int> runs{0};
  PeriodicTask* self = nullptr;
  absl::Notification constructed;
  PeriodicTask task("self", kNever, [&] {
    constructed.WaitForNotification();
    if (++runs < 3) self->Wake();
  });
  self = &task;
  constructed.Notify();
  task.Wake();
  CHECK(WaitUntil([&] { return runs.load() == 3; }, kPatience));
}

}  // namespace
}  // namespace convoy
