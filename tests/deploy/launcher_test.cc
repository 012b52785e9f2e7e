// convoy_train's children do not outlive it: SIGKILLed in the middle of a run, it takes its
// convoy_ps and agents with it.
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "tests/catch.h"
#include "tests/support/subprocess.h"

namespace convoy {
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

TEST_CASE("convoy_train SIGKILLed mid-run leaves no convoy_ps or agent running", "[launcher]") {
  const std::string dir = MakeTempDir("convoy_launcher");
  const std::string run = dir + "/runs/run";
  const std::string log = dir + "/train.log";
  absl::StatusOr<Subprocess> train =
      Subprocess::Start({CONVOY_TRAIN_BINARY, "--runs_dir=" + dir + "/runs", "--name=run",
                         "--agents=2", "--minutes=5", "--model=compact", "--device=cpu",
                         "--validate_every_seconds=0", "--eval_episodes=1"},
                        log);
  REQUIRE(train.ok());
  const pid_t train_pid = train->pid();

  // Running: convoy_ps wrote its port and both agents are up (their log directories exist),
  // and all three children have exec'd the run's programs. A child that is forked but not yet
  // exec'd still shows convoy_train's command line, which names the run only as two flags.
  std::set<pid_t> children;
  const bool started = WaitUntil(
      [&] {
        children = ChildrenOf(train_pid);
        int of_run = 0;
        for (pid_t child : children) of_run += absl::StrContains(CmdLine(child), run) ? 1 : 0;
        return fs::exists(run + "/ps.port") && fs::exists(run + "/agent-0/agent.log") &&
               fs::exists(run + "/agent-1/agent.log") && children.size() == 3 && of_run == 3;
      },
      absl::Seconds(120));
  INFO(ReadWholeFile(log));
  for (pid_t child : children) UNSCOPED_INFO(child << ": " << CmdLine(child));
  REQUIRE(started);  // convoy_ps and the two agents of this run, nothing else.

  train->Signal(SIGKILL);
  REQUIRE(train->Wait(absl::Seconds(10)) == 128 + SIGKILL);
  // They stop on SIGTERM: convoy_ps drains and writes its final checkpoint, within its grace.
  const bool gone = WaitUntil(
      [&] {
        for (pid_t child : children) {
          if (Alive(child)) return false;
        }
        return true;
      },
      absl::Seconds(60));
  for (pid_t child : children) {
    if (Alive(child)) {
      UNSCOPED_INFO("still running: " << child << " " << StatusField(child, "Name"));
      ::kill(child, SIGKILL);
    }
  }
  CHECK(gone);
}

}  // namespace
}  // namespace convoy
