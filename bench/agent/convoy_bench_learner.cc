// convoy_bench_learner: DQN train steps per second of the agent's LibTorch learner
// (agent/learning/learner.h), beside the same update written in PyTorch and run by Debian's
// python3-torch (bench/agent/pytorch_learner.py), in the same run.
//
// A train step is one minibatch through the learner as an agent training alone runs it:
// DqnLearner:: Accumulate (the Double DQN target from the target network, the online forward, Huber
// loss, backward, and reading back loss, mean Q and TD errors), then StepLocal (mean, clip at norm
// 10, Adam). Both sides use a fixed random uint8 minibatch, the same network (the script checks the
// parameter count), the same batch size and the same number of intra-op threads. The two are timed
// alternately, --repeats times each, and the table gives medians, so that load on a shared machine
// falls on both.
//
// --devices=cpu,cuda adds rows on the first CUDA device, with the minibatch already there (as the
// agent's BatchSampler delivers it), and --amp=off,on rows with mixed precision (autocast and loss
// scaling on both sides; CUDA only). A CUDA row also gives the GPU's utilisation and memory in use,
// sampled through NVML (common/support/gpu_monitor.h) while the C++ learner is timed; its intra-op thread
// count is the first of --threads.
#include <glog/logging.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "agent/learning/device.h"
#include "agent/learning/learner.h"
#include "common/model/model_registry.h"
#include "common/settings/flag_ranges.h"
#include "common/settings/run_defaults.h"
#include "common/support/gpu_monitor.h"
#include "common/support/init.h"
#include "common/support/periodic_task.h"

ABSL_FLAG(std::vector<std::string>, models, std::vector<std::string>({"compact", "cookbook"}),
          "Models to time, comma-separated (compact, cookbook, optionally _dueling).");
ABSL_FLAG(std::vector<std::string>, threads, std::vector<std::string>({"1", "2"}),
          "Intra-op thread counts to time, comma-separated (CPU rows; CUDA rows use the first).");
ABSL_FLAG(std::vector<std::string>, devices, std::vector<std::string>({"cpu"}),
          "Devices to time, comma-separated: cpu, cuda (the first GPU; its rows are skipped, "
          "saying so, where LibTorch sees none).");
ABSL_FLAG(std::vector<std::string>, amp, std::vector<std::string>({"off"}),
          "Mixed precision, comma-separated: off, on (CUDA rows only: autocast and loss scaling).");
ABSL_FLAG(int, batch_size, convoy::run_defaults::kBatchSize,
          "Minibatch size (the agents' default; RESULT keys name any other).");
ABSL_FLAG(double, seconds, 3, "Seconds per timing.");
ABSL_FLAG(int, repeats, 3, "Timings per side; the table gives their medians.");
ABSL_FLAG(int, warmup_steps, 20,
          "Train steps before each timing, untimed (allocations, CUDA's lazy initialisation).");
ABSL_FLAG(std::string, python, "/usr/bin/python3",
          "Python with Debian's python3-torch (the same LibTorch version as the C++ side); on a "
          "CUDA machine, the python whose torch the C++ side was built against.");
ABSL_FLAG(std::string, script, CONVOY_PYTORCH_LEARNER_SCRIPT, "The PyTorch twin of the learner.");

namespace convoy::bench {
namespace {

// How often the GPU is sampled while the C++ learner is timed; NVML's own utilisation period is
// 1/6 s to 1 s.
constexpr absl::Duration kGpuSampleInterval = absl::Milliseconds(100);
constexpr double kBytesPerMiB = 1024.0 * 1024.0;

enum class BenchDevice { kCpu, kCuda };

absl::StatusOr<BenchDevice> ParseDevice(absl::string_view name) {
  if (name == "cpu") return BenchDevice::kCpu;
  if (name == "cuda") return BenchDevice::kCuda;
  return absl::InvalidArgumentError(absl::StrCat("--devices: '", name, "' is not cpu or cuda"));
}

absl::StatusOr<bool> ParseAmp(absl::string_view value) {
  if (value == "off") return false;
  if (value == "on") return true;
  return absl::InvalidArgumentError(absl::StrCat("--amp: '", value, "' is not off or on"));
}

// One row of the table: where and how the learner runs.
struct Setting {
  BenchDevice device = BenchDevice::kCpu;
  bool amp = false;
  int threads = 1;

  torch::Device torch_device() const {
    return device == BenchDevice::kCuda ? torch::Device(torch::kCUDA, 0)
                                        : torch::Device(torch::kCPU);
  }
  const char* device_name() const { return device == BenchDevice::kCuda ? "cuda" : "cpu"; }
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// The GPU's utilisation (mean) and memory in use (peak) over a span, sampled by NVML every
// kGpuSampleInterval from construction to Stop.
class GpuSampling {
 public:
  explicit GpuSampling(const GpuMonitor* monitor) {
    if (monitor == nullptr) return;
    task_.emplace("gpu sampling", kGpuSampleInterval, [this, monitor] {
      absl::StatusOr<GpuSample> sample = monitor->Sample();
      if (!sample.ok()) return;
      ++samples_;
      utilisation_sum_ += sample->utilisation_percent;
      peak_memory_bytes_ =
          std::max(peak_memory_bytes_, static_cast<double>(sample->memory_used_bytes));
    });
  }

  void Stop() {
    if (task_.has_value()) task_->Stop();
  }
  // Negative when nothing was sampled (no monitor, or every query failed).
  double mean_utilisation_percent() const {
    return samples_ > 0 ? utilisation_sum_ / samples_ : -1;
  }
  double peak_memory_mib() const { return samples_ > 0 ? peak_memory_bytes_ / kBytesPerMiB : -1; }

 private:
  // Written by the task's thread only, read after Stop joined it.
  int samples_ = 0;
  double utilisation_sum_ = 0;
  double peak_memory_bytes_ = 0;
  std::optional<PeriodicTask> task_;  // Last: stopped (by its destructor) before the counts go.
};

struct CppTiming {
  double steps_per_s = 0;
  double gpu_utilisation_percent = -1;  // Negative: not sampled.
  double gpu_memory_mib = -1;
};

// Train steps per second of the C++ learner; `mirror`: with mirror augmentation (the cookbook's
// actions). With `gpu`, the GPU is sampled while the steps are timed.
CppTiming TimeCpp(const ModelInfo& model, const Setting& setting, int batch,
                  absl::Duration duration, bool mirror, const GpuMonitor* gpu) {
  agent::LearnerOptions options;
  options.model = model.spec.name;
  options.device = setting.torch_device();
  options.amp = setting.amp;
  if (mirror) options.mirror_actions = {4, 3, 2, 1, 0};
  absl::StatusOr<std::unique_ptr<agent::DqnLearner>> learner = agent::DqnLearner::Create(options);
  CHECK(learner.ok()) << learner.status();
  const ModelSpec& s = model.spec;
  torch::manual_seed(7);
  const torch::Device device = options.device;
  const auto image = [&] {
    return torch::randint(0, 256, {batch, s.channels, s.height, s.width}, torch::kUInt8).to(device);
  };
  const torch::Tensor observations = image(), next_observations = image();
  const torch::Tensor actions = torch::randint(0, s.num_actions, {batch}, torch::kInt64).to(device);
  const torch::Tensor returns = torch::rand({batch}).to(device);
  const torch::Tensor discounts = torch::full({batch}, 0.99f).to(device);
  const torch::Tensor weights = torch::ones({batch}).to(device);
  auto step = [&] {
    (*learner)->Accumulate(observations, next_observations, actions, returns, discounts, weights);
    (*learner)->StepLocal();
  };
  // The loss is read back every step, so the device is never more than a step behind the clock;
  // the synchronisations make the clock's ends exact.
  const auto synchronize = [&] {
    if (device.is_cuda()) torch::cuda::synchronize();
  };
  for (int i = 0; i < absl::GetFlag(FLAGS_warmup_steps); ++i) step();
  synchronize();
  GpuSampling sampling(gpu);
  int steps = 0;
  const absl::Time start = absl::Now();
  while (absl::Now() - start < duration) {
    step();
    ++steps;
  }
  synchronize();
  CppTiming timing;
  timing.steps_per_s = steps / absl::ToDoubleSeconds(absl::Now() - start);
  sampling.Stop();
  timing.gpu_utilisation_percent = sampling.mean_utilisation_percent();
  timing.gpu_memory_mib = sampling.peak_memory_mib();
  return timing;
}

// Train steps per second of the PyTorch twin, or a negative value when it cannot run.
double TimePython(const ModelInfo& model, const Setting& setting, int batch,
                  absl::Duration duration, std::string* error) {
  const std::string command = absl::StrCat(
      absl::GetFlag(FLAGS_python), " ", absl::GetFlag(FLAGS_script), " --model=", model.spec.name,
      " --batch_size=", batch, " --threads=", setting.threads, " --device=", setting.device_name(),
      " --amp=", setting.amp ? "on" : "off", " --warmup_steps=", absl::GetFlag(FLAGS_warmup_steps),
      " --seconds=", absl::ToDoubleSeconds(duration), " --parameters=", model.parameter_count,
      " 2>&1");
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) {
    *error = "cannot run " + command;
    return -1;
  }
  std::string output;
  std::array<char, 512> buffer;
  while (std::fgets(buffer.data(), buffer.size(), pipe) != nullptr) output += buffer.data();
  const int status = ::pclose(pipe);
  double steps_per_s = -1;
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    if (absl::ConsumePrefix(&line, "RESULT steps_per_s=")) {
      if (!absl::SimpleAtod(line, &steps_per_s)) steps_per_s = -1;
    }
  }
  if (status != 0 || steps_per_s < 0) {
    *error = absl::StrCat(command, " failed: ", output,
                          "(Debian's python3-torch: apt-get install python3-torch)");
    return -1;
  }
  return steps_per_s;
}

// The RESULT key of a row: the model, the batch size unless it is the default, then the threads on
// the CPU or cuda[_amp].
std::string ResultKey(const std::string& model, int batch, const Setting& setting) {
  std::string key = model;
  if (batch != run_defaults::kBatchSize) absl::StrAppend(&key, "_batch_", batch);
  if (setting.device == BenchDevice::kCpu) {
    absl::StrAppend(&key, "_threads_", setting.threads);
  } else {
    absl::StrAppend(&key, "_cuda", setting.amp ? "_amp" : "");
  }
  return key;
}

int Run() {
  if (!FlagsInRange(
          "convoy_bench_learner",
          {IntRange("batch_size", absl::GetFlag(FLAGS_batch_size), 1, 65536),
           RealRange("seconds", absl::GetFlag(FLAGS_seconds), 0, kNoRealMax, Ends::kOpenMin),
           IntRange("repeats", absl::GetFlag(FLAGS_repeats), 1, 1000),
           IntRange("warmup_steps", absl::GetFlag(FLAGS_warmup_steps), 0, 100000)})) {
    return kExitUsage;
  }
  const int batch = absl::GetFlag(FLAGS_batch_size);
  const absl::Duration duration = absl::Seconds(absl::GetFlag(FLAGS_seconds));
  std::vector<int> thread_counts;
  for (const std::string& t : absl::GetFlag(FLAGS_threads)) {
    int n = 0;
    if (!absl::SimpleAtoi(t, &n) || n < 1) {
      std::fprintf(stderr, "--threads: '%s' is not a positive count\n", t.c_str());
      return 2;
    }
    thread_counts.push_back(n);
  }
  if (thread_counts.empty()) {
    std::fprintf(stderr, "--threads: give at least one count\n");
    return kExitUsage;
  }
  // The rows for each model: the CPU at each thread count, CUDA at each --amp. AMP is CUDA's only.
  std::vector<Setting> settings;
  bool cuda_requested = false;
  for (const std::string& d : absl::GetFlag(FLAGS_devices)) {
    absl::StatusOr<BenchDevice> device = ParseDevice(d);
    if (!device.ok()) {
      std::fprintf(stderr, "%s\n", std::string(device.status().message()).c_str());
      return kExitUsage;
    }
    for (const std::string& a : absl::GetFlag(FLAGS_amp)) {
      absl::StatusOr<bool> amp = ParseAmp(a);
      if (!amp.ok()) {
        std::fprintf(stderr, "%s\n", std::string(amp.status().message()).c_str());
        return kExitUsage;
      }
      if (*device == BenchDevice::kCpu) {
        if (*amp) continue;
        for (int threads : thread_counts) settings.push_back({*device, false, threads});
      } else {
        cuda_requested = true;
        settings.push_back({*device, *amp, thread_counts.front()});
      }
    }
  }
  if (settings.empty()) {
    std::fprintf(stderr, "nothing to time: --amp=on applies to --devices=cuda only\n");
    return kExitUsage;
  }
  std::printf(
      "DQN train steps/s, batch %d, LibTorch %s (C++) against PyTorch from Python, medians of %d "
      "alternating timings of %g s\n",
      batch, TORCH_VERSION, absl::GetFlag(FLAGS_repeats), absl::ToDoubleSeconds(duration));
  const bool have_cuda = agent::CudaAvailable();
  std::unique_ptr<GpuMonitor> gpu;
  if (cuda_requested) {
    if (have_cuda) {
      gpu = GpuMonitor::Open(0);
      const std::string sampled =
          gpu != nullptr ? "sampled by NVML" : "not sampled: NVML cannot be loaded (see the log)";
      std::printf("cuda: %s; GPU utilisation and memory %s\n",
                  agent::DescribeDevice(torch::Device(torch::kCUDA, 0)).c_str(), sampled.c_str());
    } else {
      std::printf("cuda: skipped: LibTorch %s sees no CUDA device here; no cuda rows\n",
                  TORCH_VERSION);
    }
  }
  std::printf("%-10s %6s %4s %8s %12s %12s %12s %14s %12s %7s %9s\n", "model", "device", "amp",
              "threads", "C++ steps/s", "Python", "C++/Python", "C++ mirrored", "mirrored/C++",
              "GPU %", "GPU MiB");
  std::vector<std::string> results;
  // After the twin fails on a device, it is not run there again.
  bool cpu_twin_failed = false, cuda_twin_failed = false;
  for (const std::string& name : absl::GetFlag(FLAGS_models)) {
    absl::StatusOr<ModelInfo> model = DescribeModel(name);
    if (!model.ok()) {
      std::fprintf(stderr, "%s\n", model.status().ToString().c_str());
      return 2;
    }
    for (const Setting& setting : settings) {
      if (setting.device == BenchDevice::kCuda && !have_cuda) continue;
      torch::set_num_threads(setting.threads);
      bool& twin_failed = setting.device == BenchDevice::kCuda ? cuda_twin_failed : cpu_twin_failed;
      const GpuMonitor* monitor = setting.device == BenchDevice::kCuda ? gpu.get() : nullptr;
      std::vector<double> cpp, mirrored, python, utilisation, memory;
      std::string error;
      for (int r = 0; r < absl::GetFlag(FLAGS_repeats); ++r) {
        const CppTiming plain =
            TimeCpp(*model, setting, batch, duration, /*mirror=*/false, monitor);
        cpp.push_back(plain.steps_per_s);
        if (plain.gpu_utilisation_percent >= 0) {
          utilisation.push_back(plain.gpu_utilisation_percent);
          memory.push_back(plain.gpu_memory_mib);
        }
        mirrored.push_back(
            TimeCpp(*model, setting, batch, duration, /*mirror=*/true, nullptr).steps_per_s);
        if (!twin_failed) {
          const double p = TimePython(*model, setting, batch, duration, &error);
          if (p < 0) {
            std::fprintf(stderr, "convoy_bench_learner: %s\n", error.c_str());
            twin_failed = true;
          } else {
            python.push_back(p);
          }
        }
      }
      const double c = Median(cpp), m = Median(mirrored), p = Median(python);
      const std::string key = ResultKey(name, batch, setting);
      const std::string threads = absl::StrCat(setting.threads);
      const std::string python_text = python.empty() ? "-" : absl::StrFormat("%.1f", p);
      const std::string ratio_text = python.empty() ? "-" : absl::StrFormat("%.2f", c / p);
      const std::string utilisation_text =
          utilisation.empty() ? "-" : absl::StrFormat("%.0f", Median(utilisation));
      const std::string memory_text =
          memory.empty() ? "-" : absl::StrFormat("%.0f", Median(memory));
      std::printf("%-10s %6s %4s %8s %12.1f %12s %12s %14.1f %12.3f %7s %9s\n", name.c_str(),
                  setting.device_name(), setting.amp ? "on" : "off", threads.c_str(), c,
                  python_text.c_str(), ratio_text.c_str(), m, m / c, utilisation_text.c_str(),
                  memory_text.c_str());
      if (!python.empty()) {
        results.push_back(absl::StrFormat("RESULT python_steps_per_s_%s=%.2f", key, p));
        results.push_back(absl::StrFormat("RESULT cpp_over_python_%s=%.3f", key, c / p));
      }
      results.push_back(absl::StrFormat("RESULT cpp_steps_per_s_%s=%.2f", key, c));
      results.push_back(absl::StrFormat("RESULT cpp_mirrored_steps_per_s_%s=%.2f", key, m));
      results.push_back(absl::StrFormat("RESULT mirrored_over_plain_%s=%.3f", key, m / c));
      if (!utilisation.empty()) {
        results.push_back(
            absl::StrFormat("RESULT gpu_utilisation_percent_%s=%.1f", key, Median(utilisation)));
        results.push_back(
            absl::StrFormat("RESULT gpu_memory_used_mib_%s=%.0f", key, Median(memory)));
      }
      std::fflush(stdout);
    }
  }
  std::printf("%s\n", absl::StrJoin(results, "\n").c_str());
  return cpu_twin_failed || cuda_twin_failed ? 1 : 0;
}

}  // namespace
}  // namespace convoy::bench

int main(int argc, char** argv) {
  convoy::InitProcess(argc, argv,
                      "convoy_bench_learner: the learner's DQN train steps/s against PyTorch.\n"
                      "Usage: convoy_bench_learner [--models=compact,cookbook] [--threads=1,2]\n"
                      "         [--devices=cpu,cuda] [--amp=off,on] [--batch_size=32]");
  return convoy::bench::Run();
}
