#include "common/support/gpu_monitor.h"

#include <dlfcn.h>

#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

#if __has_include(<nvml.h>)
#include <nvml.h>
#define CONVOY_HAVE_NVML_H 1
#endif

namespace convoy {
namespace {

#if defined(CONVOY_HAVE_NVML_H)
// The toolkit's header is present: take its types, so the signatures below are checked against it.
using NvmlReturn = nvmlReturn_t;
using NvmlDevice = nvmlDevice_t;
using NvmlUtilization = nvmlUtilization_t;
using NvmlMemory = nvmlMemory_t;
constexpr NvmlReturn kNvmlSuccess = NVML_SUCCESS;
#else
// The few pieces of NVML's stable C ABI this file uses, as nvml.h declares them.
using NvmlReturn = int;
struct nvmlDevice_st;
using NvmlDevice = nvmlDevice_st*;
struct NvmlUtilization {
  unsigned int gpu;
  unsigned int memory;
};
struct NvmlMemory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
constexpr NvmlReturn kNvmlSuccess = 0;
#endif

// NVML_DEVICE_NAME_V2_BUFFER_SIZE: room for any device name.
constexpr unsigned int kNameBufferSize = 96;

using InitFn = NvmlReturn (*)();
using ShutdownFn = NvmlReturn (*)();
using GetHandleByIndexFn = NvmlReturn (*)(unsigned int, NvmlDevice*);
using GetUtilizationRatesFn = NvmlReturn (*)(NvmlDevice, NvmlUtilization*);
using GetMemoryInfoFn = NvmlReturn (*)(NvmlDevice, NvmlMemory*);
using GetNameFn = NvmlReturn (*)(NvmlDevice, char*, unsigned int);
using ErrorStringFn = const char* (*)(NvmlReturn);

#if defined(CONVOY_HAVE_NVML_H)
static_assert(std::is_same_v<InitFn, decltype(&nvmlInit_v2)>);
static_assert(std::is_same_v<ShutdownFn, decltype(&nvmlShutdown)>);
static_assert(std::is_same_v<GetHandleByIndexFn, decltype(&nvmlDeviceGetHandleByIndex_v2)>);
static_assert(std::is_same_v<GetUtilizationRatesFn, decltype(&nvmlDeviceGetUtilizationRates)>);
static_assert(std::is_same_v<GetMemoryInfoFn, decltype(&nvmlDeviceGetMemoryInfo)>);
static_assert(std::is_same_v<GetNameFn, decltype(&nvmlDeviceGetName)>);
static_assert(std::is_same_v<ErrorStringFn, decltype(&nvmlErrorString)>);
#endif

template <typename Fn>
bool Resolve(void* library, const char* symbol, Fn* fn) {
  *fn = reinterpret_cast<Fn>(dlsym(library, symbol));
  return *fn != nullptr;
}

}  // namespace

struct GpuMonitor::Nvml {
  void* library = nullptr;
  InitFn init = nullptr;
  ShutdownFn shutdown = nullptr;
  GetHandleByIndexFn get_handle_by_index = nullptr;
  GetUtilizationRatesFn get_utilization_rates = nullptr;
  GetMemoryInfoFn get_memory_info = nullptr;
  GetNameFn get_name = nullptr;
  ErrorStringFn error_string = nullptr;  // Optional: only for messages.
  NvmlDevice device = nullptr;
  bool initialised = false;

  std::string Error(NvmlReturn code) const {
    const char* text = error_string != nullptr ? error_string(code) : nullptr;
    return text != nullptr ? absl::StrCat(text, " (NVML error ", static_cast<int>(code), ")")
                           : absl::StrCat("NVML error ", static_cast<int>(code));
  }

  ~Nvml() {
    if (initialised) shutdown();
    if (library != nullptr) dlclose(library);
  }
};

std::unique_ptr<GpuMonitor> GpuMonitor::OpenLibrary(const std::string& library, int device_index) {
  if (device_index < 0) {
    LOG(INFO) << "No GPU monitor: device index " << device_index << " is negative";
    return nullptr;
  }
  auto nvml = std::make_unique<Nvml>();
  nvml->library = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (nvml->library == nullptr) {
    const char* error = dlerror();
    LOG(INFO) << "No GPU monitor: cannot load " << library << " (" << (error ? error : "unknown")
              << "); GPU utilisation and memory are not logged";
    return nullptr;
  }
  if (!Resolve(nvml->library, "nvmlInit_v2", &nvml->init) ||
      !Resolve(nvml->library, "nvmlShutdown", &nvml->shutdown) ||
      !Resolve(nvml->library, "nvmlDeviceGetHandleByIndex_v2", &nvml->get_handle_by_index) ||
      !Resolve(nvml->library, "nvmlDeviceGetUtilizationRates", &nvml->get_utilization_rates) ||
      !Resolve(nvml->library, "nvmlDeviceGetMemoryInfo", &nvml->get_memory_info) ||
      !Resolve(nvml->library, "nvmlDeviceGetName", &nvml->get_name)) {
    LOG(INFO) << "No GPU monitor: " << library << " lacks an NVML entry point";
    return nullptr;
  }
  Resolve(nvml->library, "nvmlErrorString", &nvml->error_string);

  NvmlReturn code = nvml->init();
  if (code != kNvmlSuccess) {
    LOG(INFO) << "No GPU monitor: nvmlInit failed: " << nvml->Error(code);
    return nullptr;
  }
  nvml->initialised = true;
  code = nvml->get_handle_by_index(static_cast<unsigned int>(device_index), &nvml->device);
  if (code != kNvmlSuccess) {
    LOG(INFO) << "No GPU monitor: no NVML device " << device_index << ": " << nvml->Error(code);
    return nullptr;
  }
  char name[kNameBufferSize] = {};
  if (nvml->get_name(nvml->device, name, kNameBufferSize) != kNvmlSuccess) name[0] = '\0';
  return std::unique_ptr<GpuMonitor>(new GpuMonitor(std::move(nvml), device_index, name));
}

GpuMonitor::GpuMonitor(std::unique_ptr<Nvml> nvml, int device_index, std::string name)
    : nvml_(std::move(nvml)), device_index_(device_index), name_(std::move(name)) {}

GpuMonitor::~GpuMonitor() = default;

absl::StatusOr<GpuSample> GpuMonitor::Sample() const {
  NvmlUtilization utilisation{};
  NvmlReturn code = nvml_->get_utilization_rates(nvml_->device, &utilisation);
  if (code != kNvmlSuccess) {
    return absl::UnavailableError(
        absl::StrCat("GPU ", device_index_, " utilisation: ", nvml_->Error(code)));
  }
  NvmlMemory memory{};
  code = nvml_->get_memory_info(nvml_->device, &memory);
  if (code != kNvmlSuccess) {
    return absl::UnavailableError(
        absl::StrCat("GPU ", device_index_, " memory: ", nvml_->Error(code)));
  }
  GpuSample sample;
  sample.utilisation_percent = static_cast<int>(utilisation.gpu);
  sample.memory_used_bytes = memory.used;
  sample.memory_total_bytes = memory.total;
  sample.name = name_;
  return sample;
}

}  // namespace convoy
