#include "agent/learning/device.h"

#include <string>

#include "absl/strings/match.h"
#include "tests/catch.h"

namespace convoy::agent {
namespace {

DeviceEnvironment Gpus(int count, std::optional<std::string> local_rank = std::nullopt) {
  DeviceEnvironment env;
  env.cuda_device_count = count;
  env.local_rank = std::move(local_rank);
  return env;
}

torch::Device MustResolve(const std::string& flag, const DeviceEnvironment& env) {
  absl::StatusOr<torch::Device> device = ResolveDevice(flag, env);
  INFO(device.status().ToString());
  REQUIRE(device.ok());
  return *device;
}

TEST_CASE("The cpu flag is the CPU with or without GPUs") {
  CHECK(MustResolve("cpu", Gpus(0)) == torch::Device(torch::kCPU));
  CHECK(MustResolve("cpu", Gpus(4)) == torch::Device(torch::kCPU));
}

TEST_CASE("Auto without GPUs falls back to the CPU") {
  CHECK(MustResolve("auto", Gpus(0)) == torch::Device(torch::kCPU));
  CHECK(MustResolve("auto", Gpus(0, "3")) == torch::Device(torch::kCPU));
}

TEST_CASE("Auto picks the first GPU when LOCAL_RANK is unset") {
  CHECK(MustResolve("auto", Gpus(2)) == torch::Device(torch::kCUDA, 0));
}

TEST_CASE("Auto picks the GPU given by LOCAL_RANK modulo the GPU count") {
  CHECK(MustResolve("auto", Gpus(4, "2")) == torch::Device(torch::kCUDA, 2));
  CHECK(MustResolve("auto", Gpus(4, "5")) == torch::Device(torch::kCUDA, 1));
  CHECK(MustResolve("auto", Gpus(1, "7")) == torch::Device(torch::kCUDA, 0));
}

TEST_CASE("Auto rejects a LOCAL_RANK that is not a non-negative integer") {
  for (const char* rank : {"", "-1", "x", "1.5", " 1"}) {
    INFO(rank);
    CHECK(ResolveDevice("auto", Gpus(2, rank)).status().code() ==
          absl::StatusCode::kInvalidArgument);
  }
}

TEST_CASE("The cuda flags name a CUDA device when GPUs are present") {
  CHECK(MustResolve("cuda", Gpus(2)) == torch::Device(torch::kCUDA, 0));
  CHECK(MustResolve("cuda:0", Gpus(2)) == torch::Device(torch::kCUDA, 0));
  CHECK(MustResolve("cuda:1", Gpus(2)) == torch::Device(torch::kCUDA, 1));
}

TEST_CASE("The cuda flags without CUDA fail with FAILED_PRECONDITION naming the flag") {
  for (const char* flag : {"cuda", "cuda:0", "cuda:3"}) {
    const absl::Status status = ResolveDevice(flag, Gpus(0)).status();
    INFO(status.ToString());
    CHECK(status.code() == absl::StatusCode::kFailedPrecondition);
    CHECK(absl::StrContains(status.message(), flag));
    CHECK(absl::StrContains(status.message(), "no CUDA"));
    CHECK(absl::StrContains(status.message(), "no GPU"));
  }
}

TEST_CASE("A GPU index out of range fails with INVALID_ARGUMENT") {
  const absl::Status status = ResolveDevice("cuda:2", Gpus(2)).status();
  CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  CHECK(absl::StrContains(status.message(), "cuda:2"));
}

TEST_CASE("Unknown device flags fail with INVALID_ARGUMENT") {
  for (const char* flag :
       {"", "gpu", "CPU", "cuda:", "cuda:-1", "cuda:x", "cuda:+1", "cuda:1:2", "mps", " cpu"}) {
    INFO(flag);
    CHECK(ResolveDevice(flag, Gpus(2)).status().code() == absl::StatusCode::kInvalidArgument);
  }
}

TEST_CASE("In this process the device resolves consistently with CUDA availability") {
  absl::StatusOr<torch::Device> device = ResolveDevice("auto");
  REQUIRE(device.ok());
  CHECK(device->is_cuda() == CudaAvailable());
  if (!CudaAvailable()) {
    CHECK(ResolveDevice("cuda").status().code() == absl::StatusCode::kFailedPrecondition);
  }
}

TEST_CASE("The CPU is described with its thread count") {
  const std::string text = DescribeDevice(torch::Device(torch::kCPU));
  CHECK(absl::StartsWith(text, "cpu ("));
  CHECK(absl::StrContains(text, std::to_string(at::get_num_threads()) + " threads)"));
}

TEST_CASE("A CUDA device is described starting with its name") {
  const torch::Device cuda(torch::kCUDA, 0);
  if (CudaAvailable()) {
    CHECK(absl::StartsWith(DescribeDevice(cuda), "cuda:0 ("));
  } else {
    CHECK(DescribeDevice(cuda) == "cuda:0");
  }
}

}  // namespace
}  // namespace convoy::agent
