#include "agent/learning/batch_sampler.h"

#include <torch/cuda.h>

#include <chrono>
#include <cstring>
#include <future>
#include <thread>
#include <vector>

#include "tests/agent/learning/replay_test_options.h"
#include "tests/catch.h"
#include "tests/skip.h"

namespace convoy::agent {
namespace {

constexpr absl::Duration kPatience =
    absl::Seconds(30);  // only ever reached when something is broken

// A memory of {3, 5, 7} frames stacked by 2, each frame constant-valued with its number mod 256.
std::unique_ptr<ReplayMemory> FrameMemory(int transitions) {
  ReplayOptions options = testing::OneStepUniform();
  options.capacity = 1000;
  options.frame_shape = {3, 5, 7};
  options.frame_stack = 2;
  options.n_step = 1;
  auto created = ReplayMemory::Create(options);
  REQUIRE(created.ok());
  auto memory = std::move(created).value();
  std::vector<uint8_t> frame(3 * 5 * 7, 0);
  memory->StartEpisode(frame.data());
  for (int i = 1; i <= transitions; ++i) {
    std::fill(frame.begin(), frame.end(), static_cast<uint8_t>(i));
    memory->Add(i % 4, static_cast<float>(i), false, frame.data());
  }
  return memory;
}

TEST_CASE("The sampler delivers batches with the right shapes and dtypes on CPU",
          "[batch_sampler]") {
  auto memory = FrameMemory(100);
  BatchSampler sampler(memory.get(), 16, 50, torch::kCPU);
  for (int round = 0; round < 5; ++round) {
    absl::StatusOr<TensorBatch> batch = sampler.Next(kPatience);
    REQUIRE(batch.ok());
    CHECK(batch->observations.sizes() == torch::IntArrayRef({16, 6, 5, 7}));
    CHECK(batch->next_observations.sizes() == torch::IntArrayRef({16, 6, 5, 7}));
    CHECK(batch->observations.dtype() == torch::kUInt8);
    CHECK(batch->next_observations.dtype() == torch::kUInt8);
    CHECK(batch->actions.sizes() == torch::IntArrayRef({16}));
    CHECK(batch->actions.dtype() == torch::kInt64);
    for (const torch::Tensor& t : {batch->returns, batch->discounts, batch->weights}) {
      CHECK(t.sizes() == torch::IntArrayRef({16}));
      CHECK(t.dtype() == torch::kFloat32);
    }
    CHECK(batch->ids.size() == 16);
    CHECK(batch->observations.device().is_cpu());
    // The contents are the memory's: frame i was reached by action i % 4 from frame i - 1 with
    // reward i.
    for (int64_t i = 0; i < 16; ++i) {
      const int64_t newest = batch->observations[i][5][0][0].item<int64_t>();
      const int64_t next = batch->next_observations[i][5][0][0].item<int64_t>();
      CHECK(next == newest + 1);
      CHECK(batch->actions[i].item<int64_t>() == next % 4);
      CHECK(batch->returns[i].item<float>() == static_cast<float>(next));
      CHECK(batch->discounts[i].item<float>() == Approx(0.99));
      CHECK(batch->weights[i].item<float>() == 1.0f);
    }
  }
  CHECK(sampler.batches_produced() >= 5);
  CHECK(sampler.learner_wait_seconds() >= 0.0);
  sampler.Stop();
}

TEST_CASE("Next times out while the memory holds fewer than the minimum", "[batch_sampler]") {
  auto memory = FrameMemory(5);
  BatchSampler sampler(memory.get(), 4, 20, torch::kCPU);
  absl::StatusOr<TensorBatch> batch = sampler.Next(absl::Milliseconds(100));
  CHECK(absl::IsDeadlineExceeded(batch.status()));
  CHECK(sampler.batches_produced() == 0);
  CHECK(sampler.learner_wait_seconds() > 0.0);

  // Once the actor has added enough, the waiting sampler wakes up by itself.
  std::vector<uint8_t> frame(3 * 5 * 7, 9);
  for (int i = 0; i < 20; ++i) memory->Add(0, 0.0f, false, frame.data());
  batch = sampler.Next(kPatience);
  REQUIRE(batch.ok());
  CHECK(batch->ids.size() == 4);
}

TEST_CASE("Next times out while the memory holds fewer than a batch", "[batch_sampler]") {
  auto memory = FrameMemory(5);
  BatchSampler sampler(memory.get(), 8, 0, torch::kCPU);
  CHECK(absl::IsDeadlineExceeded(sampler.Next(absl::Milliseconds(50)).status()));
}

TEST_CASE("Next returns cancelled after Stop", "[batch_sampler]") {
  auto memory = FrameMemory(100);
  BatchSampler sampler(memory.get(), 8, 0, torch::kCPU);
  REQUIRE(sampler.Next(kPatience).ok());
  sampler.Stop();
  CHECK(absl::IsCancelled(sampler.Next(kPatience).status()));
  sampler.Stop();  // idempotent
}

TEST_CASE("Stop wakes a Next that is waiting", "[batch_sampler]") {
  auto memory = FrameMemory(2);
  BatchSampler sampler(memory.get(), 8, 0, torch::kCPU);
  std::thread stopper([&] {
    // Time for Next to start waiting, the case under test; no state shows that it waits. A Stop
    // that came first would give Next the same answer, so the check below holds either way.
    absl::SleepFor(absl::Milliseconds(50));
    sampler.Stop();
  });
  CHECK(absl::IsCancelled(sampler.Next(kPatience).status()));
  stopper.join();
}

TEST_CASE("Destroying a sampler that waits on an empty memory stops it", "[batch_sampler]") {
  auto memory = FrameMemory(0);
  // The destructor must wake the waiting thread and join it, not wait for transitions that never come.
  std::future<void> destroyed = std::async(std::launch::async, [&] {
    BatchSampler sampler(memory.get(), 32, 1000, torch::kCPU);
    // Time for its thread to start waiting on the memory, the case under test; nothing shows that
    // it waits, and a destructor that came first must return all the same.
    absl::SleepFor(absl::Milliseconds(50));
  });
  REQUIRE(destroyed.wait_for(std::chrono::seconds(30)) == std::future_status::ready);
}

TEST_CASE("The sampler keeps at most prefetch batches ready", "[batch_sampler]") {
  auto memory = FrameMemory(100);
  BatchSampler sampler(memory.get(), 8, 0, torch::kCPU, /*prefetch=*/3);
  REQUIRE(sampler.Next(kPatience).ok());
  // The one taken and three ready: the sampler must get there, then stop.
  const absl::Time deadline = absl::Now() + kPatience;
  while (sampler.batches_produced() < 1 + 3 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  // A negative check: time passes to show that no batch is made beyond the prefetch.
  absl::SleepFor(absl::Milliseconds(100));
  CHECK(sampler.batches_produced() <= 1 + 3);
}

TEST_CASE("Prioritized batches carry their importance weights and ids", "[batch_sampler]") {
  ReplayOptions options = testing::OneStepUniform();
  options.capacity = 100;
  options.frame_shape = {1, 2, 2};
  options.prioritized = true;
  auto created = ReplayMemory::Create(options);
  REQUIRE(created.ok());
  auto memory = std::move(created).value();
  std::vector<uint8_t> frame(4, 0);
  memory->StartEpisode(frame.data());
  for (int i = 0; i < 20; ++i) memory->Add(0, 0.0f, false, frame.data());
  std::vector<uint64_t> ids(20);
  std::vector<float> td(20);
  for (int i = 0; i < 20; ++i) {
    ids[i] = i;
    td[i] = static_cast<float>(i + 1);
  }
  memory->UpdatePriorities(ids.data(), td.data(), ids.size());
  BatchSampler sampler(memory.get(), 10, 0, torch::kCPU);
  absl::StatusOr<TensorBatch> batch = sampler.Next(kPatience);
  REQUIRE(batch.ok());
  CHECK(batch->weights.max().item<float>() == Approx(1.0f));
  CHECK(batch->weights.min().item<float>() < 1.0f);
  for (uint64_t id : batch->ids) CHECK(id < 20);
}

TEST_CASE("On CUDA the batches arrive on the device", "[batch_sampler][cuda]") {
  if (!torch::cuda::is_available()) CONVOY_SKIP("no CUDA device on this machine");
  auto memory = FrameMemory(100);
  BatchSampler sampler(memory.get(), 16, 0, torch::Device(torch::kCUDA, 0));
  absl::StatusOr<TensorBatch> batch = sampler.Next(kPatience);
  REQUIRE(batch.ok());
  CHECK(batch->observations.device().is_cuda());
  CHECK(batch->weights.device().is_cuda());
  const torch::Tensor obs = batch->observations.cpu();
  const torch::Tensor next = batch->next_observations.cpu();
  CHECK((next.select(1, 5) - obs.select(1, 5))
            .to(torch::kInt64)
            .remainder(256)
            .eq(1)
            .all()
            .item<bool>());
}

}  // namespace
}  // namespace convoy::agent
