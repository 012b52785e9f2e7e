#include "param_server/core/push_buffer_pool.h"

#include <atomic>
#include <thread>
#include <utility>
#include <vector>

#include "tests/catch.h"

namespace convoy::ps {
namespace {

TEST_CASE("The pool hands out at most its capacity of model-sized buffers, then queues waiters",
          "[push_buffer_pool]") {
  PushBufferPool pool(/*capacity=*/2, /*elements=*/5, /*max_waiting=*/8);
  CHECK(pool.bytes() == 2 * 5 * sizeof(float));
  PushBufferPool::Ticket a = pool.Acquire([](std::vector<float>) { FAIL("a had one at once"); });
  PushBufferPool::Ticket b = pool.Acquire([](std::vector<float>) { FAIL("b had one at once"); });
  REQUIRE(a.verdict == Admission::Verdict::kNow);
  REQUIRE(b.verdict == Admission::Verdict::kNow);
  CHECK(a.buffer.size() == 5);
  CHECK(pool.in_use() == 2);
  std::vector<float> handed;
  PushBufferPool::Ticket c =
      pool.Acquire([&](std::vector<float> buffer) { handed = std::move(buffer); });
  REQUIRE(c.verdict == Admission::Verdict::kWaiting);
  CHECK(pool.waiting() == 1);
  CHECK(handed.empty());
  pool.Release(std::move(a.buffer));  // To the waiter, not to the pool.
  CHECK(handed.size() == 5);
  CHECK(pool.waiting() == 0);
  CHECK(pool.in_use() == 2);
  pool.Release(std::move(b.buffer));
  pool.Release(std::move(handed));
  CHECK(pool.in_use() == 0);
}

TEST_CASE("Waiters get buffers in arrival order", "[push_buffer_pool]") {
  PushBufferPool pool(1, 3, 8);
  PushBufferPool::Ticket held = pool.Acquire([](std::vector<float>) {});
  REQUIRE(held.verdict == Admission::Verdict::kNow);
  std::vector<int> order;
  std::vector<std::vector<float>> got;
  for (int i = 0; i < 3; ++i) {
    REQUIRE(pool.Acquire([&, i](std::vector<float> buffer) {
                  order.push_back(i);
                  got.push_back(std::move(buffer));
                })
                .verdict == Admission::Verdict::kWaiting);
  }
  pool.Release(std::move(held.buffer));
  pool.Release(std::move(got.back()));
  pool.Release(std::move(got.back()));
  CHECK(order == std::vector<int>{0, 1, 2});
}

TEST_CASE("With every buffer in use and the waiters at their bound, the pool refuses",
          "[push_buffer_pool]") {
  PushBufferPool pool(1, 3, /*max_waiting=*/1);
  PushBufferPool::Ticket held = pool.Acquire([](std::vector<float>) {});
  CHECK(pool.Acquire([](std::vector<float>) {}).verdict == Admission::Verdict::kWaiting);
  bool ran = false;
  CHECK(pool.Acquire([&](std::vector<float>) { ran = true; }).verdict ==
        Admission::Verdict::kRefused);
  CHECK(pool.waiting() == 1);
  pool.Release(std::move(held.buffer));
  CHECK_FALSE(ran);  // A refused acquire never gets a buffer.
}

TEST_CASE("A wait withdrawn in time never runs; one withdrawn too late reports it",
          "[push_buffer_pool]") {
  PushBufferPool pool(1, 3, 8);
  PushBufferPool::Ticket held = pool.Acquire([](std::vector<float>) {});
  bool first_ran = false;
  std::vector<float> second;
  PushBufferPool::Ticket first = pool.Acquire([&](std::vector<float>) { first_ran = true; });
  PushBufferPool::Ticket then =
      pool.Acquire([&](std::vector<float> buffer) { second = std::move(buffer); });
  CHECK(pool.CancelWait(first.id));
  pool.Release(std::move(held.buffer));
  CHECK_FALSE(first_ran);
  CHECK(second.size() == 3);  // The next waiter had it.
  CHECK_FALSE(pool.CancelWait(then.id));
  CHECK_FALSE(pool.CancelWait(12345));
}

TEST_CASE("A returned buffer of another size is made model-sized again", "[push_buffer_pool]") {
  PushBufferPool pool(1, 4, 0);
  PushBufferPool::Ticket held = pool.Acquire([](std::vector<float>) {});
  held.buffer.clear();
  pool.Release(std::move(held.buffer));
  PushBufferPool::Ticket again = pool.Acquire([](std::vector<float>) {});
  REQUIRE(again.verdict == Admission::Verdict::kNow);
  CHECK(again.buffer.size() == 4);
}

TEST_CASE("Threads acquiring and releasing at once never exceed the capacity or lose a buffer",
          "[push_buffer_pool][concurrency]") {
  constexpr size_t kCapacity = 3;
  PushBufferPool pool(kCapacity, 16, 1000);
  std::atomic<int> holding{0};
  std::atomic<int> most{0};
  std::atomic<int> done{0};
  auto use = [&](std::vector<float> buffer) {
    const int now = ++holding;
    int seen = most.load();
    while (now > seen && !most.compare_exchange_weak(seen, now)) {
    }
    --holding;
    pool.Release(std::move(buffer));
    ++done;
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        PushBufferPool::Ticket ticket = pool.Acquire(use);
        if (ticket.verdict == Admission::Verdict::kNow) use(std::move(ticket.buffer));
      }
    });
  }
  for (std::thread& t : threads) t.join();
  CHECK(done.load() == 6 * 200);
  CHECK(most.load() <= static_cast<int>(kCapacity));
  CHECK(pool.in_use() == 0);
  CHECK(pool.waiting() == 0);
}

}  // namespace
}  // namespace convoy::ps
