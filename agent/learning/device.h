// Which device an agent computes on: the --device flag (auto|cpu|cuda|cuda:N) resolved against the
// LibTorch build and the GPUs present. The same binary runs on CPU when LibTorch has no CUDA.
#ifndef CONVOY_AGENT_LEARNING_DEVICE_H_
#define CONVOY_AGENT_LEARNING_DEVICE_H_

#include <torch/torch.h>

#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace convoy::agent {

// What device resolution depends on, so it can be stated in tests.
struct DeviceEnvironment {
  // CUDA devices LibTorch can use: 0 when LibTorch has no CUDA or no GPU is visible.
  int cuda_device_count = 0;
  // The LOCAL_RANK environment variable, set by launchers that start one process per GPU.
  std::optional<std::string> local_rank;

  // This process's environment.
  static DeviceEnvironment Current();
};

// Resolves --device:
//   auto    cuda:(LOCAL_RANK mod count) if LOCAL_RANK is set, else cuda:0; cpu when there is no
//   GPU. cpu     the CPU. cuda    cuda:0.   cuda:N   the N-th CUDA device.
// Errors: FAILED_PRECONDITION naming the flag for cuda or cuda:N when LibTorch has no CUDA or no
// GPU is visible; INVALID_ARGUMENT for N out of range, a LOCAL_RANK that is not a non-negative
// integer (only consulted when there are GPUs), or any other flag value.
absl::StatusOr<torch::Device> ResolveDevice(const std::string& flag, const DeviceEnvironment& env);

// As above, in this process's environment.
absl::StatusOr<torch::Device> ResolveDevice(const std::string& flag);

// Whether LibTorch was built with CUDA and sees at least one GPU.
bool CudaAvailable();

// For logs: "cpu (2 threads)", or "cuda:0 (NVIDIA H200, 139 GiB)" with LibTorch's name and memory
// of the device when LibTorch has CUDA (just "cuda:0" otherwise).
std::string DescribeDevice(const torch::Device& device);

}  // namespace convoy::agent

#endif  // CONVOY_AGENT_LEARNING_DEVICE_H_
