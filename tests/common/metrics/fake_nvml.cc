// A stand-in for libnvidia-ml.so.1 with NVML's C ABI, so GpuMonitor's loading and sampling are
// tested on machines without a GPU. Device 0 has fallen off the bus; device 1 answers.
#include <cstring>

namespace {
struct FakeDevice {
  unsigned int index;
};
FakeDevice devices[2] = {{0}, {1}};
constexpr int kSuccess = 0;
constexpr int kInvalidArgument = 2;
constexpr int kGpuIsLost = 15;
}  // namespace

extern "C" {

struct FakeUtilization {
  unsigned int gpu;
  unsigned int memory;
};
struct FakeMemory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

int nvmlInit_v2() { return kSuccess; }
int nvmlShutdown() { return kSuccess; }

int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void** device) {
  if (index >= 2) return kInvalidArgument;
  *device = &devices[index];
  return kSuccess;
}

int nvmlDeviceGetUtilizationRates(void* device, FakeUtilization* utilization) {
  if (static_cast<FakeDevice*>(device)->index == 0) return kGpuIsLost;
  utilization->gpu = 42;
  utilization->memory = 7;
  return kSuccess;
}

int nvmlDeviceGetMemoryInfo(void* device, FakeMemory* memory) {
  if (static_cast<FakeDevice*>(device)->index == 0) return kGpuIsLost;
  memory->total = 80ull << 30;
  memory->used = 3ull << 30;
  memory->free = memory->total - memory->used;
  return kSuccess;
}

int nvmlDeviceGetName(void* device, char* name, unsigned int length) {
  const char* text = static_cast<FakeDevice*>(device)->index == 0 ? "Fake GPU 0" : "Fake GPU 1";
  std::strncpy(name, text, length);
  return kSuccess;
}

const char* nvmlErrorString(int result) {
  return result == kGpuIsLost ? "GPU is lost" : "Unknown Error";
}

}  // extern "C"
