#include "param_server/core/push_queue.h"

#include <thread>
#include <utility>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "tests/catch.h"

namespace convoy::ps {
namespace {

QueuedPush PushFrom(const std::string& agent) {
  QueuedPush push;
  push.header.agent_id = agent;
  return push;
}

TEST_CASE("Take hands out up to its bound of queued pushes, in arrival order", "[push_queue]") {
  PushQueue queue;
  for (const char* agent : {"a", "b", "c"}) {
    QueuedPush push = PushFrom(agent);
    REQUIRE(queue.Add(push));
  }
  CHECK(queue.size() == 3);
  std::vector<QueuedPush> first = queue.Take(2);
  REQUIRE(first.size() == 2);
  CHECK(first[0].header.agent_id == "a");
  CHECK(first[1].header.agent_id == "b");
  std::vector<QueuedPush> rest = queue.Take(2);
  REQUIRE(rest.size() == 1);
  CHECK(rest[0].header.agent_id == "c");
}

TEST_CASE("Take waits for a push", "[push_queue]") {
  PushQueue queue;
  absl::Notification took;
  std::vector<QueuedPush> batch;
  std::thread worker([&] {
    batch = queue.Take(8);
    took.Notify();
  });
  CHECK_FALSE(took.WaitForNotificationWithTimeout(absl::Milliseconds(100)));
  QueuedPush push = PushFrom("a");
  REQUIRE(queue.Add(push));
  worker.join();
  REQUIRE(batch.size() == 1);
}

TEST_CASE("A closed queue refuses new pushes and hands out what it holds, then nothing",
          "[push_queue]") {
  PushQueue queue;
  QueuedPush queued = PushFrom("a");
  REQUIRE(queue.Add(queued));
  queue.Close();
  QueuedPush late = PushFrom("late");
  CHECK_FALSE(queue.Add(late));
  CHECK(late.header.agent_id == "late");  // Handed back whole.
  CHECK(queue.Take(8).size() == 1);
  CHECK(queue.Take(8).empty());
}

}  // namespace
}  // namespace convoy::ps
