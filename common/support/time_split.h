// Where an agent's CPU-seconds go: the acting thread's time by phase (environment step,
// preprocessing, inference, replay, train step, sync, waiting, the rest), the background sampler's
// CPU (replay sampling and staging) and the whole process's, so that what the other threads take
// (the exchanges with the server, gRPC, logs) is their difference. An agent reports it in its
// progress line, its TensorBoard scalars and its Prometheus metrics; the launchers merge the
// agents' and print the shares.
//
// The acting thread's phases are timed on its own CPU clock (CLOCK_THREAD_CPUTIME_ID), so a core
// shared with other processes does not inflate them; waiting (for a minibatch or for the server's
// answer) is timed on the wall clock, since a waiting thread takes no CPU.
#ifndef CONVOY_COMMON_SUPPORT_TIME_SPLIT_H_
#define CONVOY_COMMON_SUPPORT_TIME_SPLIT_H_

#include <array>
#include <string>

namespace convoy {

enum class AgentPhase {
  kEnvironment = 0,  // The simulator's step and episode resets.
  kPreprocess,       // The environment's frame pooled into the model's input.
  kInference,        // Choosing the action: the greedy forward pass (and epsilon's draw).
  kReplay,           // Adding transitions and updating priorities on the acting thread.
  kTrain,            // The learner's forward and backward passes on a minibatch.
  kSync,             // The sync's work on the acting thread: gradient taken, local steps, polls.
  kWait,             // Blocked: on the sampler's next minibatch or on the server's answer (wall).
  kOther,            // The rest of the loop: episode ends, reports, logs, checkpoint scheduling.
};
inline constexpr int kAgentPhases = 8;

// "env", "preprocess", "inference", "replay", "train", "sync", "wait", "other": the keys of the
// progress line (cpu_<key>; wait_s), the metrics' labels and the columns of the tables.
const char* AgentPhaseKey(AgentPhase phase);

// Cumulative seconds since the agent started.
struct TimeSplit {
  // The acting thread's CPU seconds by phase; for kWait, wall seconds.
  std::array<double, kAgentPhases> phase{};
  double sampler_cpu = 0;  // The sampler thread's CPU seconds.
  double process_cpu = 0;  // The whole process's CPU seconds (every thread, user and system).

  double& operator[](AgentPhase p) { return phase[static_cast<int>(p)]; }
  double operator[](AgentPhase p) const { return phase[static_cast<int>(p)]; }
  // The acting thread's CPU seconds: every phase but waiting.
  double acting_cpu() const;
  // The other threads' CPU seconds (the exchanges' workers, gRPC, logs): process_cpu less the
  // acting thread's and the sampler's, never below 0.
  double other_threads_cpu() const;

  TimeSplit& operator+=(const TimeSplit& other);
  // Field by field; used for the change over an interval.
  TimeSplit operator-(const TimeSplit& other) const;
};

// The split as shares of the process's CPU-seconds: "env 24% preprocess 3% inference 9% replay
// 5% sampler 6% train 41% sync 2% threads 4% other 6% | wait 1% of wall". `wall` (seconds the split
// covers, summed over agents) gives the wait's share; 0 leaves it out. Empty with no CPU time.
std::string FormatTimeShares(const TimeSplit& split, double wall);

// The split of a whole run as a table (rows: where the CPU-seconds went; columns: seconds, share,
// milliseconds per environment step) and RESULT lines: cpu_seconds_<key> and cpu_share_<key> for
// each part (env, preprocess, inference, replay, sampler, train, sync, threads, other),
// cpu_seconds (the agents' total), wait_share (of `wall`), env_steps_per_cpu_second and
// train_steps_per_cpu_second. `wall` is the agents' wall seconds summed; the steps are the agents'.
std::string FormatTimeSplitTable(const TimeSplit& split, double wall, double env_steps,
                                 double train_steps);

// Times the acting thread. Lap() charges the time since the previous lap (or since the clock was
// made) to a phase, so every moment of the loop goes to one phase. Not thread-safe: the acting
// thread owns it.
class PhaseClock {
 public:
  PhaseClock();
  void Lap(AgentPhase phase);
  // Phases so far (sampler_cpu and process_cpu left 0: the caller's to fill).
  const TimeSplit& split() const { return split_; }

 private:
  TimeSplit split_;
  double last_cpu_ = 0;
  double last_wall_ = 0;
};

// This thread's CPU seconds (CLOCK_THREAD_CPUTIME_ID).
double ThreadCpuSeconds();
// This process's CPU seconds (CLOCK_PROCESS_CPUTIME_ID).
double ProcessCpuSeconds();

}  // namespace convoy

#endif  // CONVOY_COMMON_SUPPORT_TIME_SPLIT_H_
