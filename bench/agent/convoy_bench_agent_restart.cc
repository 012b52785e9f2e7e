// convoy_bench_agent_restart: what a replay checkpoint buys an agent that is restarted (preempted,
// its pod moved): the time from its start to its first minibatch and to a replay memory as full as
// it had, resumed (--resume) against started empty, on the embedded simulator or an AirSim-protocol
// one (--sim, e.g. a convoy_sim). The agent trains alone, as the replay and the learner do not care
// where the weights come from.
//
// First an agent fills its replay memory (--replay_memory_size transitions, acting at random with
// no training, as a long run's memory is full) and saves it when it stops: the checkpoint's size
// and save time. Then, --repeats times, an agent is created with --resume and one without, each run
// until its first minibatch: the medians of the times from its start (Agent::Create) to that
// minibatch, with the transitions it then held. With --refill, the agent started empty also runs
// on, training at the default replay ratio as a restarted agent would, until its memory holds what
// the resumed one started with. Prints a table, then RESULT key=value lines. Not a test: the
// numbers are the machine's.
#include <glog/logging.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "agent/agent.h"
#include "agent/environment/scenario_flags.h"
#include "bench/bench_support.h"
#include "common/agent_settings.h"
#include "common/init.h"

namespace {
// One object rather than a temporary: GCC 12 takes a temporary's SimTarget::host for uninitialised.
const convoy::EnvironmentSpec& DefaultSpec() {
  static const convoy::EnvironmentSpec* const spec = new convoy::EnvironmentSpec();
  return *spec;
}
}  // namespace

ABSL_FLAG(convoy::SimTarget, sim, DefaultSpec().sim,
          "embedded, or airsim://host:port (a convoy_sim started beforehand).");
ABSL_FLAG(uint64_t, replay_memory_size, convoy::AgentSettings{}.replay_memory_size,
          "Replay memory capacity, all of it filled before the restarts.");
ABSL_FLAG(uint64_t, min_replay_size, convoy::AgentSettings{}.min_replay_size,
          "Transitions an agent started empty collects before its first minibatch.");
ABSL_FLAG(int, repeats, 3, "Restarts timed each way; the table gives their medians.");
ABSL_FLAG(bool, refill, false,
          "Also time the agent started empty until its memory holds what the resumed one started "
          "with (once; minutes at the default replay size).");
ABSL_FLAG(std::string, dir, "",
          "Directory of the checkpoint (default: a fresh one under $TMPDIR, removed after).");

namespace convoy {
namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The agents' options: the scenario flags' (--scenario, as convoy_agent's), the bench's own.
AgentOptions BaseOptions(const std::string& dir) {
  AgentOptions o;
  BENCH_CHECK_OK(ScenarioFromFlags(&o.environment));
  o.environment.sim = absl::GetFlag(FLAGS_sim);
  o.replay_memory_size = absl::GetFlag(FLAGS_replay_memory_size);
  o.min_replay_size = absl::GetFlag(FLAGS_min_replay_size);
  o.replay_checkpoint_dir = dir;
  o.report_every = absl::Hours(1);  // No progress lines.
  return o;
}

struct Start {
  double create_seconds = 0;       // Agent::Create: the simulator, the learner, the memory.
  double first_train_seconds = 0;  // From the start to the first minibatch.
  uint64_t transitions = 0;        // Held at the first minibatch.
  double refill_seconds = 0;       // To `refill_to` transitions (0: not asked).
  double env_steps_per_s = 0;      // While refilling.
};

// Runs an agent with `options` until its first minibatch (and, with refill_to, until it holds that
// many transitions), then stops it.
Start Run(const AgentOptions& options, uint64_t refill_to) {
  Start s;
  const BenchClock::time_point start = BenchClock::now();
  absl::StatusOr<std::unique_ptr<Agent>> agent = Agent::Create(options);
  BENCH_CHECK_OK(agent.status());
  s.create_seconds = Since(start);
  std::atomic<bool> stop{false};
  absl::Status result;
  std::thread runner([&] { result = (*agent)->Run(stop); });
  while ((*agent)->stats().first_train_seconds == 0) absl::SleepFor(absl::Milliseconds(1));
  const AgentStats first = (*agent)->stats();
  s.first_train_seconds = first.first_train_seconds;
  s.transitions = first.replay_size;
  if (refill_to > 0) {
    while ((*agent)->stats().replay_size < refill_to) absl::SleepFor(absl::Milliseconds(100));
    s.refill_seconds = Since(start);
    s.env_steps_per_s = static_cast<double>((*agent)->stats().env_steps) / s.refill_seconds;
  }
  stop = true;
  runner.join();
  BENCH_CHECK_OK(result);
  return s;
}

int Main() {
  std::string dir = absl::GetFlag(FLAGS_dir);
  const bool own_dir = dir.empty();
  if (own_dir) {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/agent-restart-XXXXXX");
    CHECK(::mkdtemp(pattern.data()) != nullptr) << "mkdtemp " << pattern;
    dir = pattern;
  }
  const uint64_t capacity = absl::GetFlag(FLAGS_replay_memory_size);
  const std::string saved_dir = dir + "/saved", empty_dir = dir + "/empty";

  // A full memory, saved as the agent stops.
  AgentOptions fill = BaseOptions(saved_dir);
  fill.min_replay_size = capacity;  // Random actions, no training, until full.
  fill.max_steps = capacity + 16;
  std::fprintf(stderr, "filling %llu transitions on %s\n",
               static_cast<unsigned long long>(capacity),
               AbslUnparseFlag(absl::GetFlag(FLAGS_sim)).c_str());
  absl::StatusOr<std::unique_ptr<Agent>> filler = Agent::Create(fill);
  BENCH_CHECK_OK(filler.status());
  std::atomic<bool> never{false};
  BENCH_CHECK_OK((*filler)->Run(never));
  const AgentStats filled = (*filler)->stats();
  filler->reset();

  std::vector<double> resumed_create, resumed_first, fresh_create, fresh_first;
  uint64_t resumed_transitions = 0, fresh_transitions = 0;
  for (int r = 0; r < absl::GetFlag(FLAGS_repeats); ++r) {
    AgentOptions resumed = BaseOptions(saved_dir);
    resumed.resume = true;
    const Start a = Run(resumed, 0);
    resumed_create.push_back(a.create_seconds);
    resumed_first.push_back(a.first_train_seconds);
    resumed_transitions = a.transitions;
    std::filesystem::remove_all(empty_dir);
    const Start b = Run(BaseOptions(empty_dir), 0);
    fresh_create.push_back(b.create_seconds);
    fresh_first.push_back(b.first_train_seconds);
    fresh_transitions = b.transitions;
  }
  Start refill;
  if (absl::GetFlag(FLAGS_refill)) {
    std::filesystem::remove_all(empty_dir);
    refill = Run(BaseOptions(empty_dir), filled.replay_size);
  }

  std::printf(
      "\nAgent restart on %s: replay memory of %llu transitions, checkpoint %.1f MB written "
      "in %.2f s\n\n",
      AbslUnparseFlag(absl::GetFlag(FLAGS_sim)).c_str(),
      static_cast<unsigned long long>(filled.replay_size),
      static_cast<double>(filled.replay_checkpoint_bytes) / 1e6, filled.replay_checkpoint_seconds);
  std::printf(
      "| restart (median of %d) | Agent::Create, s | start to first minibatch, s | "
      "transitions then | start to %llu transitions, s |\n|---|---:|---:|---:|---:|\n",
      absl::GetFlag(FLAGS_repeats), static_cast<unsigned long long>(filled.replay_size));
  std::printf("| resumed (--resume) | %.2f | %.2f | %llu | %.2f |\n", Median(resumed_create),
              Median(resumed_first), static_cast<unsigned long long>(resumed_transitions),
              Median(resumed_first));
  std::printf("| started empty | %.2f | %.2f | %llu | %s |\n", Median(fresh_create),
              Median(fresh_first), static_cast<unsigned long long>(fresh_transitions),
              refill.refill_seconds > 0
                  ? absl::StrFormat("%.1f (%.0f env steps/s)", refill.refill_seconds,
                                    refill.env_steps_per_s)
                        .c_str()
                  : "not run (--refill)");
  std::printf("\nRESULT replay_transitions=%llu checkpoint_megabytes=%.1f save_seconds=%.2f\n",
              static_cast<unsigned long long>(filled.replay_size),
              static_cast<double>(filled.replay_checkpoint_bytes) / 1e6,
              filled.replay_checkpoint_seconds);
  std::printf(
      "RESULT resumed_create_seconds=%.3f resumed_first_train_seconds=%.3f "
      "resumed_transitions_at_first_train=%llu\n",
      Median(resumed_create), Median(resumed_first),
      static_cast<unsigned long long>(resumed_transitions));
  std::printf(
      "RESULT empty_create_seconds=%.3f empty_first_train_seconds=%.3f "
      "empty_transitions_at_first_train=%llu\n",
      Median(fresh_create), Median(fresh_first),
      static_cast<unsigned long long>(fresh_transitions));
  if (refill.refill_seconds > 0) {
    std::printf("RESULT empty_refill_seconds=%.1f empty_refill_env_steps_per_s=%.1f\n",
                refill.refill_seconds, refill.env_steps_per_s);
  }
  if (own_dir) std::filesystem::remove_all(dir);
  return 0;
}

}  // namespace
}  // namespace convoy

int main(int argc, char** argv) {
  convoy::InitProcess(argc, argv,
                      "convoy_bench_agent_restart: an agent restarted with and without its replay "
                      "checkpoint.\nUsage: convoy_bench_agent_restart [--sim=airsim://host:port] "
                      "[--repeats=3] [--refill]");
  return convoy::Main();
}
