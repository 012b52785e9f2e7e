// GPU utilisation and memory read through NVML, for the metrics. NVML is loaded at run time, so a
// binary built here runs on machines without an NVIDIA driver; there the monitor is simply absent.
#ifndef CONVOY_COMMON_SUPPORT_GPU_MONITOR_H_
#define CONVOY_COMMON_SUPPORT_GPU_MONITOR_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace convoy {

struct GpuSample {
  // Percent of the last sample period (1/6 s to 1 s, chosen by the driver) in which a kernel ran.
  int utilisation_percent = 0;
  uint64_t memory_used_bytes = 0;
  uint64_t memory_total_bytes = 0;
  std::string name;
};

// One GPU, by NVML index. NVML numbers GPUs in PCI bus order and ignores CUDA_VISIBLE_DEVICES, so
// NVML index N is CUDA device N only when all GPUs are visible and CUDA_DEVICE_ORDER=PCI_BUS_ID (or
// there is one GPU). Thread-safe: NVML's calls are.
class GpuMonitor {
 public:
  // The library name the dynamic loader is asked for: the one NVIDIA's driver installs.
  static constexpr char kNvmlLibrary[] = "libnvidia-ml.so.1";

  // Returns nullptr, after an INFO log saying why, when NVML cannot be loaded or initialised or has
  // no device `device_index`. Never fails otherwise.
  static std::unique_ptr<GpuMonitor> Open(int device_index) {
    return OpenLibrary(kNvmlLibrary, device_index);
  }
  // As Open, loading NVML from `library` (a name or path for dlopen).
  static std::unique_ptr<GpuMonitor> OpenLibrary(const std::string& library, int device_index);

  // Shuts NVML down (it counts initialisations, so other monitors stay valid) and unloads the
  // library.
  ~GpuMonitor();

  GpuMonitor(const GpuMonitor&) = delete;
  GpuMonitor& operator=(const GpuMonitor&) = delete;

  // Reads the current utilisation and memory. Errors: UNAVAILABLE with NVML's message if a query
  // fails (for example after the GPU fell off the bus).
  absl::StatusOr<GpuSample> Sample() const;

  int device_index() const { return device_index_; }
  const std::string& name() const { return name_; }

 private:
  struct Nvml;  // The library handle and the resolved entry points.

  GpuMonitor(std::unique_ptr<Nvml> nvml, int device_index, std::string name);

  const std::unique_ptr<Nvml> nvml_;
  const int device_index_;
  const std::string name_;
};

}  // namespace convoy

#endif  // CONVOY_COMMON_SUPPORT_GPU_MONITOR_H_
