#include "agent/learning/device.h"

#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

#if defined(CONVOY_HAVE_CUDA_TORCH)
#include <ATen/cuda/CUDAContext.h>
#endif

namespace convoy::agent {
namespace {

constexpr char kCudaPrefix[] = "cuda:";

// A non-negative decimal integer of digits only ("+1", " 1" and "-1" are not).
std::optional<int> ParseIndex(absl::string_view text) {
  if (text.empty() || text.size() > 9) return std::nullopt;
  for (char c : text) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return std::nullopt;
  }
  int value = 0;
  if (!absl::SimpleAtoi(text, &value)) return std::nullopt;
  return value;
}

absl::Status NoCuda(const std::string& flag) {
  return absl::FailedPreconditionError(absl::StrCat(
      "--device=", flag,
      ": this LibTorch has no CUDA or no GPU is visible; use --device=cpu or --device=auto"));
}

}  // namespace

DeviceEnvironment DeviceEnvironment::Current() {
  DeviceEnvironment env;
  env.cuda_device_count = CudaAvailable() ? static_cast<int>(torch::cuda::device_count()) : 0;
  if (const char* rank = std::getenv("LOCAL_RANK"); rank != nullptr) env.local_rank = rank;
  return env;
}

absl::StatusOr<torch::Device> ResolveDevice(const std::string& flag, const DeviceEnvironment& env) {
  const int count = env.cuda_device_count;
  if (flag == "cpu") return torch::Device(torch::kCPU);
  if (flag == "auto") {
    if (count <= 0) return torch::Device(torch::kCPU);
    if (!env.local_rank.has_value()) return torch::Device(torch::kCUDA, 0);
    const std::optional<int> rank = ParseIndex(*env.local_rank);
    if (!rank.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--device=auto: LOCAL_RANK=\"", *env.local_rank, "\" is not a non-negative integer"));
    }
    return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(*rank % count));
  }
  if (flag == "cuda") {
    if (count <= 0) return NoCuda(flag);
    return torch::Device(torch::kCUDA, 0);
  }
  if (absl::StartsWith(flag, kCudaPrefix)) {
    const std::optional<int> index =
        ParseIndex(absl::string_view(flag).substr(sizeof(kCudaPrefix) - 1));
    if (!index.has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--device=", flag, ": the GPU index must be a non-negative integer"));
    }
    if (count <= 0) return NoCuda(flag);
    if (*index >= count) {
      return absl::InvalidArgumentError(
          absl::StrCat("--device=", flag, ": there are ", count, " GPUs, numbered from 0"));
    }
    return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(*index));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--device=", flag, ": expected auto, cpu, cuda or cuda:N"));
}

absl::StatusOr<torch::Device> ResolveDevice(const std::string& flag) {
  return ResolveDevice(flag, DeviceEnvironment::Current());
}

bool CudaAvailable() { return torch::cuda::is_available(); }

std::string DescribeDevice(const torch::Device& device) {
  if (device.is_cpu()) return absl::StrCat("cpu (", at::get_num_threads(), " threads)");
  std::string text = device.str();
#if defined(CONVOY_HAVE_CUDA_TORCH)
  if (device.is_cuda() && CudaAvailable()) {
    const int index = device.has_index() ? device.index() : c10::cuda::current_device();
    const cudaDeviceProp* properties = at::cuda::getDeviceProperties(index);
    constexpr uint64_t kBytesPerGiB = uint64_t{1} << 30;
    absl::StrAppend(&text, " (", properties->name, ", ",
                    static_cast<uint64_t>(properties->totalGlobalMem) / kBytesPerGiB, " GiB)");
  }
#endif
  return text;
}

}  // namespace convoy::agent
