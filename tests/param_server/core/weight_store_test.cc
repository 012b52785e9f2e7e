#include "param_server/core/weight_store.h"

#include <atomic>
#include <thread>
#include <vector>

#include "tests/catch.h"

namespace convoy::ps {
namespace {

TEST_CASE("A snapshot never changes after newer versions are published", "[weight_store]") {
  WeightStore store(std::vector<float>(4, 1.0f), 7);
  std::shared_ptr<const WeightSnapshot> old = store.Snapshot();
  CHECK(old->version == 7);
  for (int v = 8; v < 20; ++v) {
    store.mutable_master()[0] = static_cast<float>(v);
    store.Publish(v);
  }
  CHECK(old->version == 7);
  CHECK(old->values == std::vector<float>(4, 1.0f));
  CHECK(store.Snapshot()->version == 19);
  CHECK(store.Snapshot()->values[0] == 19.0f);
  CHECK(store.version() == 19);
}

TEST_CASE("Concurrent readers only ever see whole versions", "[weight_store]") {
  constexpr size_t kSize = 1 << 16;
  WeightStore store(std::vector<float>(kSize, 0.0f), 0);
  std::atomic<bool> done{false};
  std::atomic<int> torn{0};
  std::atomic<int> reads{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 3; ++r) {
    readers.emplace_back([&] {
      while (!done.load()) {
        std::shared_ptr<const WeightSnapshot> s = store.Snapshot();
        const float expected = static_cast<float>(s->version);
        for (float v : s->values) {
          if (v != expected) {
            ++torn;
            break;
          }
        }
        ++reads;
      }
    });
  }
  for (uint64_t v = 1; v <= 300; ++v) {
    std::fill(store.mutable_master(), store.mutable_master() + kSize, static_cast<float>(v));
    store.Publish(v);
  }
  while (reads.load() < 100) std::this_thread::yield();
  done = true;
  for (std::thread& t : readers) t.join();
  CHECK(torn.load() == 0);
  CHECK(store.Snapshot()->version == 300);
}

}  // namespace
}  // namespace convoy::ps
