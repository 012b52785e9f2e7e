#include "common/support/child_process.h"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "tests/catch.h"
#include "tests/support/subprocess.h"

namespace convoy {
namespace {

using testing::WaitUntil;

// Whether `pid` is a live process: not gone, and not a zombie waiting for its new parent to reap
// it.
bool Alive(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(in, stat)) return false;
  const size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] != 'Z';
}

// Starts the helper launcher with `flags` (child_process_helper.cc); returns its child's pid.
pid_t StartLauncher(std::optional<ChildProcess>& launcher, std::vector<std::string> flags) {
  ChildProcess::Options options;
  options.pipe_stdout = true;
  std::vector<std::string> argv = {CONVOY_CHILD_PROCESS_HELPER};
  argv.insert(argv.end(), flags.begin(), flags.end());
  absl::StatusOr<ChildProcess> started = ChildProcess::Start(argv, options);
  REQUIRE(started.ok());
  launcher = *std::move(started);
  std::string line;
  char c = 0;
  while (::read(launcher->stdout_fd(), &c, 1) == 1 && c != '\n') line.push_back(c);
  int pid = 0;
  REQUIRE(absl::SimpleAtoi(line, &pid));
  REQUIRE(Alive(pid));
  return pid;
}

TEST_CASE("A child dies with its launcher, even when the launcher is SIGKILLed",
          "[child_process]") {
  std::optional<ChildProcess> launcher;
  const pid_t grandchild = StartLauncher(launcher, {});
  launcher->Signal(SIGKILL);
  REQUIRE(launcher->Wait(absl::Seconds(10)).has_value());
  const bool gone = WaitUntil([&] { return !Alive(grandchild); }, absl::Seconds(10));
  if (!gone) ::kill(grandchild, SIGKILL);
  CHECK(gone);
}

TEST_CASE("Without a parent-death signal a child outlives its launcher", "[child_process]") {
  // The control for the case above: the helper and the check can tell the two apart.
  std::optional<ChildProcess> launcher;
  const pid_t grandchild = StartLauncher(launcher, {"--outlive"});
  launcher->Signal(SIGKILL);
  REQUIRE(launcher->Wait(absl::Seconds(10)).has_value());
  CHECK(!WaitUntil([&] { return !Alive(grandchild); }, absl::Seconds(1)));
  ::kill(grandchild, SIGKILL);
}

TEST_CASE("A child that ignores the parent-death signal is SIGKILLed after its launcher's death",
          "[child_process]") {
  std::optional<ChildProcess> launcher;
  const pid_t grandchild = StartLauncher(launcher, {"--ignore_term"});
  launcher->Signal(SIGKILL);
  REQUIRE(launcher->Wait(absl::Seconds(10)).has_value());
  const bool gone = WaitUntil([&] { return !Alive(grandchild); }, absl::Seconds(30));
  if (!gone) ::kill(grandchild, SIGKILL);
  CHECK(gone);
}

TEST_CASE(
    "Without a SIGKILL after it, a child that ignores the parent-death signal outlives its "
    "launcher",
    "[child_process]") {
  // The control for the case above: the SIGKILL is the watchdog's, sent only when asked for.
  std::optional<ChildProcess> launcher;
  const pid_t grandchild = StartLauncher(launcher, {"--ignore_term", "--no_kill"});
  launcher->Signal(SIGKILL);
  REQUIRE(launcher->Wait(absl::Seconds(10)).has_value());
  CHECK(!WaitUntil([&] { return !Alive(grandchild); },
                   ChildProcess::kKillAfterParentDeath + absl::Seconds(2)));
  ::kill(grandchild, SIGKILL);
}

TEST_CASE("A launcher's watchdog holds none of its files: its stdout ends when it dies",
          "[child_process]") {
  std::optional<ChildProcess> launcher;
  StartLauncher(launcher, {});
  launcher->Signal(SIGKILL);
  REQUIRE(launcher->Wait(absl::Seconds(10)).has_value());
  pollfd readable = {launcher->stdout_fd(), POLLIN, 0};
  REQUIRE(::poll(&readable, 1, 30000) == 1);  // Not a wait for the watchdog to end.
  char c = 0;
  CHECK(::read(launcher->stdout_fd(), &c, 1) == 0);  // End of file.
}

TEST_CASE("A child started from a thread that ends keeps running", "[child_process]") {
  // PR_SET_PDEATHSIG follows the forking thread: Start forks on a thread that lives as long as the
  // process, not on the caller's.
  std::optional<ChildProcess> child;
  std::thread([&] {
    absl::StatusOr<ChildProcess> started = ChildProcess::Start({"/bin/sleep", "600"}, {});
    if (started.ok()) child = *std::move(started);
  }).join();
  REQUIRE(child.has_value());
  CHECK(!child->Wait(absl::Milliseconds(500)).has_value());
  child->Signal(SIGKILL);
  CHECK(child->Wait(absl::Seconds(10)) == 128 + SIGKILL);
}

TEST_CASE("A child is in its launcher's process group", "[child_process]") {
  absl::StatusOr<ChildProcess> child = ChildProcess::Start({"/bin/sleep", "600"}, {});
  REQUIRE(child.ok());
  CHECK(::getpgid(child->pid()) == ::getpgrp());
}

TEST_CASE("A child runs in its working directory and reports its exit code", "[child_process]") {
  const std::string dir = testing::MakeTempDir("convoy_child");
  ChildProcess::Options options;
  options.working_dir = dir;
  options.log_path = dir + "/log";
  absl::StatusOr<ChildProcess> child =
      ChildProcess::Start({"/bin/sh", "-c", "pwd; exit 3"}, options);
  REQUIRE(child.ok());
  CHECK(child->Wait(absl::Seconds(30)) == 3);
  CHECK(testing::ReadWholeFile(dir + "/log") == std::filesystem::canonical(dir).string() + "\n");
}

TEST_CASE("A program that cannot be executed is an error naming it", "[child_process]") {
  absl::StatusOr<ChildProcess> child = ChildProcess::Start({"/nonexistent/program"}, {});
  REQUIRE(!child.ok());
  CHECK(child.status().code() == absl::StatusCode::kInternal);
  CHECK(child.status().message().find("/nonexistent/program") != absl::string_view::npos);
  ChildProcess::Options options;
  options.working_dir = "/nonexistent/dir";
  CHECK(!ChildProcess::Start({"/bin/true"}, options).ok());
}

}  // namespace
}  // namespace convoy
