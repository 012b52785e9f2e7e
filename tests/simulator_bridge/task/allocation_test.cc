// The hot loop allocates nothing: DrivingEnv::Step over an EmbeddedSim, after the first frames.
// This binary replaces the global operator new to count allocations in a measured region only.
#include <atomic>
#include <cstdlib>
#include <new>

#include "simulator_bridge/task/driving_env.h"
#include "tests/catch.h"
#include "tests/simulator_bridge/world/test_world.h"

namespace {
std::atomic<bool> counting{false};
std::atomic<int64_t> allocations{0};
}  // namespace

void* operator new(std::size_t size) {
  if (counting.load(std::memory_order_relaxed)) allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t size) { return operator new(size); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
// The nothrow forms too, so every allocation this binary makes pairs malloc with free (ASan checks).
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  if (counting.load(std::memory_order_relaxed)) allocations.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(size == 0 ? 1 : size);
}
void* operator new[](std::size_t size, const std::nothrow_t& tag) noexcept {
  return operator new(size, tag);
}
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

namespace convoy::sim {
namespace {

int64_t CountAllocations(DrivingEnv& env, uint8_t* obs, int steps) {
  allocations = 0;
  counting = true;
  int done = 0;
  for (int i = 0; i < steps; ++i) {
    absl::StatusOr<StepResult> r = env.Step(i % env.num_actions(), obs);
    if (!r.ok() || r->done) {
      done = 1;
      break;
    }
  }
  counting = false;
  return done ? -1 : allocations.load();
}

TEST_CASE("stepping a DrivingEnv over an EmbeddedSim allocates nothing", "[allocation]") {
  for (ObservationKind kind :
       {ObservationKind::kCookbookCrop, ObservationKind::kGray84, ObservationKind::kNone}) {
    EmbeddedSimOptions sim;
    sim.world = TestWorld();
    sim.num_parked_cars = 30;
    DrivingEnvOptions options;
    options.observation = kind;
    options.frame_stack = 4;
    // Straight ahead only, so the episode outlasts the measured steps.
    options.actions = {DrivingAction{0.0f, -1.0f, 0.0f}};
    std::unique_ptr<DrivingEnv> env = *DrivingEnv::CreateEmbedded(sim, options);
    std::vector<uint8_t> obs(env->observation_size());
    // A start on a long straight: seeds until the first 40 steps end no episode.
    int64_t count = -1;
    for (uint64_t seed = 0; seed < 50 && count < 0; ++seed) {
      REQUIRE(env->Reset(seed, obs.data()).ok());
      REQUIRE(env->Step(0, obs.data()).ok());  // first frames may size buffers
      count = CountAllocations(*env, obs.data(), 40);
    }
    INFO("observation kind " << static_cast<int>(kind));
    CHECK(count == 0);
  }
}

}  // namespace
}  // namespace convoy::sim
