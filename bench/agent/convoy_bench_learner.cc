// convoy_bench_learner: DQN train steps per second of the agent's LibTorch learner
// (agent/learner.h), beside the same update written in PyTorch and run by Debian's python3-torch
// (bench/agent/pytorch_learner.py), in the same run.
//
// A train step is one minibatch through the learner as an agent training alone runs it:
// DqnLearner:: Accumulate (the Double DQN target from the target network, the online forward, Huber
// loss, backward, and reading back loss, mean Q and TD errors), then StepLocal (mean, clip at norm
// 10, Adam). Both sides use a fixed random uint8 minibatch, the same network (the script checks the
// parameter count), the same batch size and the same number of intra-op threads. The two are timed
// alternately, --repeats times each, and the table gives medians, so that load on a shared machine
// falls on both.
#include <glog/logging.h>
#include <torch/torch.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "agent/learner.h"
#include "common/flag_ranges.h"
#include "common/init.h"
#include "common/model_registry.h"

ABSL_FLAG(std::vector<std::string>, models, std::vector<std::string>({"compact", "cookbook"}),
          "Models to time, comma-separated (compact, cookbook, optionally _dueling).");
ABSL_FLAG(std::vector<std::string>, threads, std::vector<std::string>({"1", "2"}),
          "Intra-op thread counts to time, comma-separated.");
ABSL_FLAG(int, batch_size, 32, "Minibatch size.");
ABSL_FLAG(double, seconds, 3, "Seconds per timing.");
ABSL_FLAG(int, repeats, 3, "Timings per side; the table gives their medians.");
ABSL_FLAG(std::string, python, "/usr/bin/python3",
          "Python with Debian's python3-torch (the same LibTorch version as the C++ side).");
ABSL_FLAG(std::string, script, CONVOY_PYTORCH_LEARNER_SCRIPT, "The PyTorch twin of the learner.");

namespace convoy {
namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Train steps per second of the C++ learner; `mirror`: with mirror augmentation (the cookbook's
// actions).
double TimeCpp(const ModelInfo& model, int batch, absl::Duration duration, bool mirror) {
  LearnerOptions options;
  options.model = model.spec.name;
  if (mirror) options.mirror_actions = {4, 3, 2, 1, 0};
  absl::StatusOr<std::unique_ptr<DqnLearner>> learner = DqnLearner::Create(options);
  CHECK(learner.ok()) << learner.status();
  const ModelSpec& s = model.spec;
  torch::manual_seed(7);
  const auto image = [&] {
    return torch::randint(0, 256, {batch, s.channels, s.height, s.width}, torch::kUInt8);
  };
  const torch::Tensor observations = image(), next_observations = image();
  const torch::Tensor actions = torch::randint(0, s.num_actions, {batch}, torch::kInt64);
  const torch::Tensor returns = torch::rand({batch});
  const torch::Tensor discounts = torch::full({batch}, 0.99f);
  const torch::Tensor weights = torch::ones({batch});
  auto step = [&] {
    (*learner)->Accumulate(observations, next_observations, actions, returns, discounts, weights);
    (*learner)->StepLocal();
  };
  for (int i = 0; i < 20; ++i) step();
  int steps = 0;
  const absl::Time start = absl::Now();
  while (absl::Now() - start < duration) {
    step();
    ++steps;
  }
  return steps / absl::ToDoubleSeconds(absl::Now() - start);
}

// Train steps per second of the PyTorch twin, or a negative value when it cannot run.
double TimePython(const ModelInfo& model, int batch, int threads, absl::Duration duration,
                  std::string* error) {
  const std::string command =
      absl::StrCat(absl::GetFlag(FLAGS_python), " ", absl::GetFlag(FLAGS_script),
                   " --model=", model.spec.name, " --batch_size=", batch, " --threads=", threads,
                   " --seconds=", absl::ToDoubleSeconds(duration),
                   " --parameters=", model.parameter_count, " 2>&1");
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

int Run() {
  if (!FlagsInRange(
          "convoy_bench_learner",
          {IntRange("batch_size", absl::GetFlag(FLAGS_batch_size), 1, 65536),
           RealRange("seconds", absl::GetFlag(FLAGS_seconds), 0, kNoRealMax, Ends::kOpenMin),
           IntRange("repeats", absl::GetFlag(FLAGS_repeats), 1, 1000)})) {
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
  std::printf(
      "DQN train steps/s, batch %d, LibTorch %s (C++) against PyTorch from Python, medians of %d "
      "alternating timings of %.0f s\n",
      batch, TORCH_VERSION, absl::GetFlag(FLAGS_repeats), absl::ToDoubleSeconds(duration));
  std::printf("%-10s %8s %12s %12s %12s %14s %12s\n", "model", "threads", "C++ steps/s", "Python",
              "C++/Python", "C++ mirrored", "mirrored/C++");
  std::vector<std::string> results;
  bool python_failed = false;
  for (const std::string& name : absl::GetFlag(FLAGS_models)) {
    absl::StatusOr<ModelInfo> model = DescribeModel(name);
    if (!model.ok()) {
      std::fprintf(stderr, "%s\n", model.status().ToString().c_str());
      return 2;
    }
    for (int threads : thread_counts) {
      torch::set_num_threads(threads);
      std::vector<double> cpp, mirrored, python;
      std::string error;
      for (int r = 0; r < absl::GetFlag(FLAGS_repeats); ++r) {
        cpp.push_back(TimeCpp(*model, batch, duration, /*mirror=*/false));
        mirrored.push_back(TimeCpp(*model, batch, duration, /*mirror=*/true));
        if (!python_failed) {
          const double p = TimePython(*model, batch, threads, duration, &error);
          if (p < 0) {
            std::fprintf(stderr, "convoy_bench_learner: %s\n", error.c_str());
            python_failed = true;
          } else {
            python.push_back(p);
          }
        }
      }
      const double c = Median(cpp), m = Median(mirrored), p = Median(python);
      const std::string key = absl::StrCat(name, "_threads_", threads);
      if (python.empty()) {
        std::printf("%-10s %8d %12.1f %12s %12s %14.1f %12.3f\n", name.c_str(), threads, c, "-",
                    "-", m, m / c);
      } else {
        std::printf("%-10s %8d %12.1f %12.1f %12.2f %14.1f %12.3f\n", name.c_str(), threads, c, p,
                    c / p, m, m / c);
        results.push_back(absl::StrFormat("RESULT python_steps_per_s_%s=%.2f", key, p));
        results.push_back(absl::StrFormat("RESULT cpp_over_python_%s=%.3f", key, c / p));
      }
      results.push_back(absl::StrFormat("RESULT cpp_steps_per_s_%s=%.2f", key, c));
      results.push_back(absl::StrFormat("RESULT cpp_mirrored_steps_per_s_%s=%.2f", key, m));
      results.push_back(absl::StrFormat("RESULT mirrored_over_plain_%s=%.3f", key, m / c));
      std::fflush(stdout);
    }
  }
  std::printf("%s\n", absl::StrJoin(results, "\n").c_str());
  return python_failed ? 1 : 0;
}

}  // namespace
}  // namespace convoy

int main(int argc, char** argv) {
  convoy::InitProcess(argc, argv,
                      "convoy_bench_learner: the learner's DQN train steps/s against PyTorch.\n"
                      "Usage: convoy_bench_learner [--models=compact,cookbook] [--threads=1,2]");
  return convoy::Run();
}
