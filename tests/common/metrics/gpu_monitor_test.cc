#include "common/support/gpu_monitor.h"

#include <cstdlib>
#include <string>

#include "absl/strings/match.h"
#include "tests/catch.h"

namespace convoy {
namespace {

TEST_CASE("Opening the GPU monitor without a usable NVML returns null") {
  // On a machine with an NVIDIA driver and a GPU this opens; elsewhere it must quietly be absent.
  std::unique_ptr<GpuMonitor> monitor = GpuMonitor::Open(0);
  if (monitor != nullptr) {
    absl::StatusOr<GpuSample> sample = monitor->Sample();
    REQUIRE(sample.ok());
    CHECK(sample->memory_total_bytes > 0);
  }
  CHECK(GpuMonitor::OpenLibrary("libconvoy-no-such-nvml.so.1", 0) == nullptr);
}

TEST_CASE("Opening the GPU monitor on a negative device index returns null") {
  CHECK(GpuMonitor::Open(-1) == nullptr);
}

#ifdef CONVOY_FAKE_NVML_PATH
TEST_CASE("The GPU monitor samples utilisation and memory through NVML") {
  std::unique_ptr<GpuMonitor> monitor = GpuMonitor::OpenLibrary(CONVOY_FAKE_NVML_PATH, 1);
  REQUIRE(monitor != nullptr);
  CHECK(monitor->device_index() == 1);
  CHECK(monitor->name() == "Fake GPU 1");
  absl::StatusOr<GpuSample> sample = monitor->Sample();
  REQUIRE(sample.ok());
  CHECK(sample->utilisation_percent == 42);
  CHECK(sample->memory_used_bytes == 3ull << 30);
  CHECK(sample->memory_total_bytes == 80ull << 30);
  CHECK(sample->name == "Fake GPU 1");
}

TEST_CASE("A failed NVML query makes a sample fail with UNAVAILABLE and NVML's message") {
  std::unique_ptr<GpuMonitor> monitor = GpuMonitor::OpenLibrary(CONVOY_FAKE_NVML_PATH, 0);
  REQUIRE(monitor != nullptr);
  absl::StatusOr<GpuSample> sample = monitor->Sample();
  CHECK(sample.status().code() == absl::StatusCode::kUnavailable);
  CHECK(absl::StrContains(sample.status().message(), "GPU is lost"));
}

TEST_CASE("The GPU monitor is absent for a device NVML does not have") {
  CHECK(GpuMonitor::OpenLibrary(CONVOY_FAKE_NVML_PATH, 7) == nullptr);
}
#endif

}  // namespace
}  // namespace convoy
