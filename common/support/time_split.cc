#include "common/support/time_split.h"

#include <time.h>

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace convoy {
namespace {

double ClockSeconds(clockid_t clock) {
  timespec now{};
  clock_gettime(clock, &now);
  return static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec);
}

}  // namespace

const char* AgentPhaseKey(AgentPhase phase) {
  switch (phase) {
    case AgentPhase::kEnvironment:
      return "env";
    case AgentPhase::kPreprocess:
      return "preprocess";
    case AgentPhase::kInference:
      return "inference";
    case AgentPhase::kReplay:
      return "replay";
    case AgentPhase::kTrain:
      return "train";
    case AgentPhase::kSync:
      return "sync";
    case AgentPhase::kWait:
      return "wait";
    case AgentPhase::kOther:
      return "other";
  }
  return "other";
}

double TimeSplit::acting_cpu() const {
  double sum = 0;
  for (int p = 0; p < kAgentPhases; ++p) {
    if (p != static_cast<int>(AgentPhase::kWait)) sum += phase[p];
  }
  return sum;
}

double TimeSplit::other_threads_cpu() const {
  return std::max(0.0, process_cpu - acting_cpu() - sampler_cpu);
}

TimeSplit& TimeSplit::operator+=(const TimeSplit& other) {
  for (int p = 0; p < kAgentPhases; ++p) phase[p] += other.phase[p];
  sampler_cpu += other.sampler_cpu;
  process_cpu += other.process_cpu;
  return *this;
}

TimeSplit TimeSplit::operator-(const TimeSplit& other) const {
  TimeSplit d;
  for (int p = 0; p < kAgentPhases; ++p) d.phase[p] = phase[p] - other.phase[p];
  d.sampler_cpu = sampler_cpu - other.sampler_cpu;
  d.process_cpu = process_cpu - other.process_cpu;
  return d;
}

namespace {

// The parts a split is shown in, in the order both formats give them.
struct Part {
  const char* key;
  const char* what;
  double seconds;
};

std::vector<Part> PartsOf(const TimeSplit& split) {
  return {
      {"env", "environment step", split[AgentPhase::kEnvironment]},
      {"preprocess", "preprocessing", split[AgentPhase::kPreprocess]},
      {"inference", "inference (acting)", split[AgentPhase::kInference]},
      {"replay", "replay: add, priorities", split[AgentPhase::kReplay]},
      {"sampler", "replay: sampling (its thread)", split.sampler_cpu},
      {"train", "train step", split[AgentPhase::kTrain]},
      {"sync", "sync on the acting thread", split[AgentPhase::kSync]},
      {"threads", "other threads (push, pull, gRPC)", split.other_threads_cpu()},
      {"other", "the loop's rest", split[AgentPhase::kOther]},
  };
}

// What the shares are of: the process's CPU, or the parts' sum when the clocks, read at different
// moments, put it a little higher.
double TotalCpu(const TimeSplit& split) {
  return std::max(split.process_cpu, split.acting_cpu() + split.sampler_cpu);
}

}  // namespace

std::string FormatTimeShares(const TimeSplit& split, double wall) {
  const double cpu = TotalCpu(split);
  if (cpu <= 0) return "";
  std::vector<std::string> shares;
  for (const Part& part : PartsOf(split)) {
    shares.push_back(
        absl::StrFormat("%s %.0f%%", part.key, 100.0 * std::max(0.0, part.seconds) / cpu));
  }
  std::string out = absl::StrJoin(shares, " ");
  if (wall > 0) {
    absl::StrAppendFormat(&out, " | wait %.0f%% of wall", 100.0 * split[AgentPhase::kWait] / wall);
  }
  return out;
}

std::string FormatTimeSplitTable(const TimeSplit& split, double wall, double env_steps,
                                 double train_steps) {
  const double cpu = TotalCpu(split);
  std::string table =
      absl::StrFormat("| %-34s | %10s | %6s | %14s |\n", "where the agents' CPU went", "CPU-s",
                      "share", "ms / env step");
  absl::StrAppendFormat(&table, "|%s|%s|%s|%s|\n", std::string(36, '-'), std::string(12, '-'),
                        std::string(8, '-'), std::string(16, '-'));
  std::string results;
  for (const Part& part : PartsOf(split)) {
    const double share = cpu > 0 ? std::max(0.0, part.seconds) / cpu : 0;
    absl::StrAppendFormat(&table, "| %-34s | %10.1f | %5.1f%% | %14.3f |\n", part.what,
                          part.seconds, 100 * share,
                          env_steps > 0 ? 1000 * part.seconds / env_steps : 0);
    absl::StrAppendFormat(&results, "RESULT cpu_seconds_%s=%.2f\nRESULT cpu_share_%s=%.4f\n",
                          part.key, part.seconds, part.key, share);
  }
  absl::StrAppendFormat(&table, "| %-34s | %10.1f | %5.1f%% | %14.3f |\n", "all", cpu, 100.0,
                        env_steps > 0 ? 1000 * cpu / env_steps : 0);
  absl::StrAppendFormat(&table, "| %-34s | %10.1f | %5.1f%% | %14s |\n", "waiting (wall, not CPU)",
                        split[AgentPhase::kWait],
                        wall > 0 ? 100 * split[AgentPhase::kWait] / wall : 0, "");
  absl::StrAppendFormat(&results, "RESULT cpu_seconds=%.2f\nRESULT wait_share=%.4f\n", cpu,
                        wall > 0 ? split[AgentPhase::kWait] / wall : 0);
  absl::StrAppendFormat(&results,
                        "RESULT env_steps_per_cpu_second=%.2f\n"
                        "RESULT train_steps_per_cpu_second=%.3f\n",
                        cpu > 0 ? env_steps / cpu : 0, cpu > 0 ? train_steps / cpu : 0);
  return table + results;
}

PhaseClock::PhaseClock()
    : last_cpu_(ThreadCpuSeconds()), last_wall_(ClockSeconds(CLOCK_MONOTONIC)) {}

void PhaseClock::Lap(AgentPhase phase) {
  const double cpu = ThreadCpuSeconds();
  const double wall = ClockSeconds(CLOCK_MONOTONIC);
  // Waiting is charged its wall time, any CPU it took (a spin, a wake-up) to the loop's rest.
  if (phase == AgentPhase::kWait) {
    split_[AgentPhase::kWait] += wall - last_wall_;
    split_[AgentPhase::kOther] += cpu - last_cpu_;
  } else {
    split_[phase] += cpu - last_cpu_;
  }
  last_cpu_ = cpu;
  last_wall_ = wall;
}

double ThreadCpuSeconds() { return ClockSeconds(CLOCK_THREAD_CPUTIME_ID); }

double ProcessCpuSeconds() { return ClockSeconds(CLOCK_PROCESS_CPUTIME_ID); }

}  // namespace convoy
