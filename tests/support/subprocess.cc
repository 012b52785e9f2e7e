#include "tests/support/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

extern char** environ;

namespace convoy::testing {

absl::StatusOr<Subprocess> Subprocess::Start(const std::vector<std::string>& argv,
                                             const std::string& log_path) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log_path.c_str(),
                                   O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // The child starts with no blocked signals, whatever the test thread had.
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv[0].c_str(), &actions, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) return absl::InternalError(absl::StrCat("cannot start ", argv[0], ": rc ", rc));
  return Subprocess(pid);
}

Subprocess::Subprocess(Subprocess&& other) noexcept
    : pid_(other.pid_), exit_code_(other.exit_code_) {
  other.pid_ = -1;
}

Subprocess& Subprocess::operator=(Subprocess&& other) noexcept {
  std::swap(pid_, other.pid_);
  std::swap(exit_code_, other.exit_code_);
  return *this;
}

Subprocess::~Subprocess() {
  if (pid_ > 0 && !exit_code_) {
    ::kill(pid_, SIGKILL);
    Wait(absl::Seconds(10));
  }
}

void Subprocess::Signal(int signal) const {
  if (pid_ > 0 && !exit_code_) ::kill(pid_, signal);
}

std::optional<int> Subprocess::Wait(absl::Duration timeout) {
  if (exit_code_) return exit_code_;
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    int status = 0;
    const pid_t done = ::waitpid(pid_, &status, WNOHANG);
    if (done == pid_) {
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      return exit_code_;
    }
    if (absl::Now() >= deadline) return std::nullopt;
    absl::SleepFor(absl::Milliseconds(20));
  }
}

bool Subprocess::running() { return !Wait(absl::ZeroDuration()).has_value(); }

absl::StatusOr<std::string> WaitForFileLine(const std::string& path, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    std::ifstream in(path);
    std::string line;
    if (in && std::getline(in, line) && !line.empty()) return line;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return absl::NotFoundError(absl::StrCat("no ", path, " after ", absl::FormatDuration(timeout)));
}

std::string MakeTempDir(const std::string& prefix) {
  const char* base = std::getenv("TMPDIR");
  std::string pattern = absl::StrCat(base ? base : "/tmp", "/", prefix, "-XXXXXX");
  char* made = ::mkdtemp(pattern.data());
  return made ? std::string(made) : std::string();
}

std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

}  // namespace convoy::testing
