// convoy_bench_agent_restart: what a replay checkpoint buys an agent that is restarted (preempted,
// its pod moved): the time from its process's start to its first minibatch and to a replay memory
// as full as it had, restarted with --resume against started empty, on the embedded simulator or an
// AirSim-protocol one (--sim, e.g. a convoy_sim). The agents are convoy_agent processes training
// alone: the replay and the learner do not care where the weights come from.
//
// First an agent fills its replay memory (--replay_memory_size transitions, acting at random with
// no training, as a long run's memory is full) and saves it as it stops: the checkpoint's size and
// save time, from its log. Then, --repeats times, an agent is started with --resume and one
// without, each until its log says it trained its first minibatch (then SIGTERM): the medians of
// the wall time from the process's start to that line and of the time the agent itself reports from
// its start, with the transitions it held. With --refill, an agent started empty also drives as
// many steps as the resumed one held transitions, training at the default replay ratio as a
// restarted agent would: its wall time. Prints a table, then RESULT key=value lines. Not a test:
// the numbers are the machine's.
#include <glog/logging.h>
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "bench/bench_support.h"
#include "common/settings/agent_settings.h"
#include "common/support/child_process.h"
#include "common/support/files.h"
#include "common/support/init.h"

ABSL_FLAG(std::string, sim, "embedded",
          "The agents' --sim: embedded, or airsim://host:port (a convoy_sim started beforehand).");
ABSL_FLAG(uint64_t, replay_memory_size, convoy::AgentSettings{}.replay_memory_size,
          "Replay memory capacity, all of it filled before the restarts.");
ABSL_FLAG(int, repeats, 3, "Restarts timed each way; the table gives their medians.");
ABSL_FLAG(bool, refill, false,
          "Also time an agent started empty driving as many steps as the resumed one held "
          "transitions (once; minutes at the default replay size).");
ABSL_FLAG(std::string, dir, "",
          "Directory of the checkpoint and logs (default: a fresh one under $TMPDIR, removed "
          "after).");
ABSL_FLAG(std::string, bin_dir, "", "Where convoy_agent is (default: beside this program).");

namespace convoy::bench {
namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The first match of `pattern` in the log at `path`, waiting up to `timeout` for it.
std::optional<std::smatch> WaitForLine(const std::string& path, const std::regex& pattern,
                                       absl::Duration timeout, std::string* text) {
  const absl::Time deadline = absl::Now() + timeout;
  do {
    *text = ReadFileToString(path).value_or("");  // Not there yet: nothing written yet.
    std::smatch m;
    if (std::regex_search(*text, m, pattern)) return m;
    absl::SleepFor(absl::Milliseconds(2));
  } while (absl::Now() < deadline);
  return std::nullopt;
}

std::vector<std::string> AgentArgs(const std::string& replay_dir) {
  const std::string bin =
      absl::GetFlag(FLAGS_bin_dir).empty() ? ExecutableDirectory() : absl::GetFlag(FLAGS_bin_dir);
  std::vector<std::string> args = {
      bin + "/convoy_agent", "--sim=" + absl::GetFlag(FLAGS_sim),
      absl::StrCat("--replay_memory_size=", absl::GetFlag(FLAGS_replay_memory_size)),
      "--report_seconds=3600"};
  if (!replay_dir.empty()) args.push_back("--replay_checkpoint_dir=" + replay_dir);
  return args;
}

struct Restart {
  double wall_seconds = 0;   // From the process's start to its log's first-minibatch line.
  double agent_seconds = 0;  // What the agent reports: from its Agent::Create on.
  uint64_t transitions = 0;  // Held at the first minibatch.
};

const std::regex kFirstMinibatch(
    R"(first minibatch ([0-9.e+-]+) s after the start, with ([0-9]+) transitions)");

// An agent started with `args` until its first minibatch, then stopped.
Restart TimeFirstMinibatch(std::vector<std::string> args, const std::string& log) {
  std::filesystem::remove(log);
  ChildProcess::Options options;
  options.log_path = log;
  const BenchClock::time_point start = BenchClock::now();
  absl::StatusOr<ChildProcess> agent = ChildProcess::Start(args, options);
  BENCH_CHECK_OK(agent.status());
  std::string text;
  const std::optional<std::smatch> line =
      WaitForLine(log, kFirstMinibatch, absl::Minutes(30), &text);
  Restart r;
  r.wall_seconds = Since(start);
  CHECK(line.has_value()) << "no first minibatch in " << log << ":\n" << text;
  r.agent_seconds = std::stod((*line)[1]);
  r.transitions = std::stoull((*line)[2]);
  agent->Signal(SIGTERM);
  CHECK(agent->Wait(absl::Minutes(2)) == 0) << "the agent did not stop cleanly; see " << log;
  return r;
}

int Main() {
  bool own_dir = false;
  const std::string dir = BenchDirectory(absl::GetFlag(FLAGS_dir), "agent-restart", &own_dir);
  const uint64_t capacity = absl::GetFlag(FLAGS_replay_memory_size);
  const std::string saved = dir + "/saved", empty = dir + "/empty";

  // A full memory, saved as the agent stops.
  std::vector<std::string> fill = AgentArgs(saved);
  fill.push_back(absl::StrCat("--min_replay_size=", capacity));  // Random actions until full.
  fill.push_back(absl::StrCat("--max_steps=", capacity + 16));
  std::fprintf(stderr, "filling %llu transitions on %s\n",
               static_cast<unsigned long long>(capacity), absl::GetFlag(FLAGS_sim).c_str());
  ChildProcess::Options fill_options;
  fill_options.log_path = dir + "/fill.log";
  absl::StatusOr<ChildProcess> filler = ChildProcess::Start(fill, fill_options);
  BENCH_CHECK_OK(filler.status());
  CHECK(filler->Wait(absl::Hours(2)) == 0)
      << "the filling agent failed; see " << dir << "/fill.log";
  std::string fill_log;
  const std::optional<std::smatch> written = WaitForLine(
      dir + "/fill.log", std::regex(R"(replay checkpoint \S+: ([0-9]+) bytes in ([0-9.e+-]+) s)"),
      absl::ZeroDuration(), &fill_log);
  CHECK(written.has_value()) << "the filling agent wrote no replay checkpoint:\n" << fill_log;
  const double checkpoint_mb = std::stod((*written)[1]) / 1e6;
  const double save_seconds = std::stod((*written)[2]);

  std::vector<double> resumed_wall, resumed_agent, empty_wall, empty_agent;
  uint64_t resumed_transitions = 0, empty_transitions = 0;
  for (int r = 0; r < absl::GetFlag(FLAGS_repeats); ++r) {
    std::vector<std::string> resume = AgentArgs(saved);
    resume.push_back("--resume");
    const Restart a = TimeFirstMinibatch(resume, dir + "/resumed.log");
    resumed_wall.push_back(a.wall_seconds);
    resumed_agent.push_back(a.agent_seconds);
    resumed_transitions = a.transitions;
    std::filesystem::remove_all(empty);
    const Restart b = TimeFirstMinibatch(AgentArgs(empty), dir + "/empty.log");
    empty_wall.push_back(b.wall_seconds);
    empty_agent.push_back(b.agent_seconds);
    empty_transitions = b.transitions;
  }
  double refill_seconds = 0;
  if (absl::GetFlag(FLAGS_refill)) {
    std::vector<std::string> refill = AgentArgs("");
    refill.push_back(absl::StrCat("--max_steps=", resumed_transitions));
    ChildProcess::Options options;
    options.log_path = dir + "/refill.log";
    const BenchClock::time_point start = BenchClock::now();
    absl::StatusOr<ChildProcess> agent = ChildProcess::Start(refill, options);
    BENCH_CHECK_OK(agent.status());
    CHECK(agent->Wait(absl::Hours(2)) == 0)
        << "the refilling agent failed; see " << options.log_path;
    refill_seconds = Since(start);
  }

  const int repeats = absl::GetFlag(FLAGS_repeats);
  std::printf(
      "\nconvoy_agent restarted on %s with a replay memory of %llu transitions: checkpoint "
      "%.1f MB, written in %.2f s\n\n",
      absl::GetFlag(FLAGS_sim).c_str(), static_cast<unsigned long long>(resumed_transitions),
      checkpoint_mb, save_seconds);
  std::printf(
      "| restart (median of %d) | process start to first minibatch, s | of it, the agent's "
      "own start to it, s | transitions then | to drive %llu steps, s |\n"
      "|---|---:|---:|---:|---:|\n",
      repeats, static_cast<unsigned long long>(resumed_transitions));
  std::printf("| resumed (--resume) | %.2f | %.2f | %llu | 0 |\n", Median(resumed_wall),
              Median(resumed_agent), static_cast<unsigned long long>(resumed_transitions));
  std::printf(
      "| started empty | %.2f | %.2f | %llu | %s |\n", Median(empty_wall), Median(empty_agent),
      static_cast<unsigned long long>(empty_transitions),
      refill_seconds > 0 ? absl::StrFormat("%.1f", refill_seconds).c_str() : "not run (--refill)");
  std::printf("\nRESULT replay_transitions=%llu checkpoint_megabytes=%.1f save_seconds=%.2f\n",
              static_cast<unsigned long long>(resumed_transitions), checkpoint_mb, save_seconds);
  std::printf(
      "RESULT resumed_first_train_wall_seconds=%.3f resumed_first_train_agent_seconds=%.3f "
      "resumed_transitions_at_first_train=%llu\n",
      Median(resumed_wall), Median(resumed_agent),
      static_cast<unsigned long long>(resumed_transitions));
  std::printf(
      "RESULT empty_first_train_wall_seconds=%.3f empty_first_train_agent_seconds=%.3f "
      "empty_transitions_at_first_train=%llu\n",
      Median(empty_wall), Median(empty_agent), static_cast<unsigned long long>(empty_transitions));
  if (refill_seconds > 0) std::printf("RESULT empty_refill_seconds=%.1f\n", refill_seconds);
  if (own_dir) std::filesystem::remove_all(dir);
  return 0;
}

}  // namespace
}  // namespace convoy::bench

int main(int argc, char** argv) {
  convoy::InitProcess(argc, argv,
                      "convoy_bench_agent_restart: convoy_agent restarted with and without its "
                      "replay checkpoint.\nUsage: convoy_bench_agent_restart "
                      "[--sim=airsim://host:port] [--repeats=3] [--refill]");
  return convoy::bench::Main();
}
