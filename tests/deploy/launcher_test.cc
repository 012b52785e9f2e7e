// convoy_train's children do not outlive it: SIGKILLed in the middle of a run, it takes its
// convoy_ps and agents with it within 2 s (SIGTERM from the kernel, SIGKILL from its watchdog
// after ChildProcess::kKillAfterParentDeath); SIGTERMed, it stops them itself before it exits.
#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <regex>
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "tests/catch.h"
#include "tests/support/subprocess.h"

namespace convoy::deploy {
namespace {

namespace fs = std::filesystem;
using testing::MakeTempDir;
using testing::ReadWholeFile;
using testing::Subprocess;
using testing::WaitUntil;

// A field of /proc/<pid>/status ("PPid"), or "" when the process is gone.
std::string StatusField(pid_t pid, const std::string& field) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (absl::StartsWith(line, field + ":")) {
      std::string value = line.substr(field.size() + 1);
      value.erase(0, value.find_first_not_of(" \t"));
      return value;
    }
  }
  return "";
}

// Whether `pid` runs: it exists and is not a zombie left for its new parent to reap.
bool Alive(pid_t pid) {
  const std::string state = StatusField(pid, "State");
  return !state.empty() && state[0] != 'Z';
}

// A process's command line, its arguments joined by NULs; "" when it is gone.
std::string CmdLine(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/cmdline"));
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// The live processes whose parent is `parent`.
std::set<pid_t> ChildrenOf(pid_t parent) {
  std::set<pid_t> children;
  for (const fs::directory_entry& entry : fs::directory_iterator("/proc")) {
    int pid = 0;
    if (!absl::SimpleAtoi(entry.path().filename().string(), &pid)) continue;
    int ppid = 0;
    if (absl::SimpleAtoi(StatusField(pid, "PPid"), &ppid) && ppid == parent && Alive(pid)) {
      children.insert(pid);
    }
  }
  return children;
}

// A convoy_train run of two agents, started and training.
struct TrainRun {
  std::string dir = MakeTempDir("convoy_launcher");
  std::string run = dir + "/runs/run";
  std::string log = dir + "/train.log";
  std::optional<Subprocess> train;
  std::set<pid_t> children;  // convoy_ps and the agents.
  pid_t watchdog = 0;        // convoy_train's watchdog (common/support/child_process.h).

  // Running: convoy_ps wrote its port and both agents have pushed (their reports name a server
  // version above 0), and all three children have exec'd the run's programs. A child that is
  // forked but not yet exec'd still shows convoy_train's command line, which names the run only
  // as two flags.
  void Start() {
    absl::StatusOr<Subprocess> started = Subprocess::Start(
        {CONVOY_TRAIN_BINARY, "--runs_dir=" + dir + "/runs", "--name=run", "--agents=2",
         "--minutes=5", "--model=compact", "--device=cpu", "--validate_every_seconds=0",
         "--eval_episodes=1", "--min_replay_size=200", "--report_seconds=1"},
        log);
    REQUIRE(started.ok());
    train = *std::move(started);
    const std::regex pushed("PS v[1-9]");
    const bool running = WaitUntil(
        [&] {
          children.clear();
          int of_run = 0;
          for (pid_t child : ChildrenOf(train->pid())) {
            if (StatusField(child, "Name") == "convoy-watchdog") {
              watchdog = child;
              continue;
            }
            children.insert(child);
            of_run += absl::StrContains(CmdLine(child), run) ? 1 : 0;
          }
          return fs::exists(run + "/ps.port") && children.size() == 3 && of_run == 3 &&
                 std::regex_search(ReadWholeFile(run + "/agent-0/agent.log"), pushed) &&
                 std::regex_search(ReadWholeFile(run + "/agent-1/agent.log"), pushed);
        },
        absl::Seconds(180));
    INFO(ReadWholeFile(log));
    for (pid_t child : children) UNSCOPED_INFO(child << ": " << CmdLine(child));
    REQUIRE(running);  // convoy_ps and the two agents of this run, nothing else.
    REQUIRE(watchdog != 0);
  }

  // Waits until `deadline` for convoy_ps, the agents and the watchdog to be gone; SIGKILLs and
  // names those still running.
  bool AllGoneBy(absl::Time deadline) {
    std::set<pid_t> started = children;
    started.insert(watchdog);
    const bool gone = WaitUntil(
        [&] {
          for (pid_t child : started) {
            if (Alive(child)) return false;
          }
          return true;
        },
        std::max(absl::ZeroDuration(), deadline - absl::Now()));
    for (pid_t child : started) {
      if (Alive(child)) {
        UNSCOPED_INFO("still running: " << child << " " << StatusField(child, "Name"));
        ::kill(child, SIGKILL);
      }
    }
    return gone;
  }
};

TEST_CASE("convoy_train SIGKILLed mid-run leaves no convoy_ps or agent running 2 s later",
          "[launcher]") {
  TrainRun t;
  t.Start();
  t.train->Signal(SIGKILL);
  const absl::Time killed = absl::Now();
  REQUIRE(t.train->Wait(absl::Seconds(10)) == 128 + SIGKILL);
  CHECK(t.AllGoneBy(killed + absl::Seconds(2)));
  // The agents ended their final sync at once rather than try a server that went with the launcher
  // (unless the watchdog's SIGKILL came first).
  for (int i = 0; i < 2; ++i) {
    const std::string agent_log = ReadWholeFile(absl::StrCat(t.run, "/agent-", i, "/agent.log"));
    INFO("agent-" << i << " log:\n" << agent_log);
    CHECK_FALSE(absl::StrContains(agent_log, "stayed away"));
  }
}

TEST_CASE("convoy_train SIGTERMed mid-run stops its children before it exits", "[launcher]") {
  TrainRun t;
  t.Start();
  t.train->Signal(SIGTERM);
  const std::optional<int> code = t.train->Wait(absl::Seconds(120));
  INFO(ReadWholeFile(t.log));
  CHECK(code == 130);
  CHECK(t.AllGoneBy(absl::Now() + absl::Seconds(2)));
}

}  // namespace
}  // namespace convoy::deploy
