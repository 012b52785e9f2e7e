#include "common/child_process.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"

extern char** environ;

namespace convoy {

namespace {

// The one thread that forks every child, so that PR_SET_PDEATHSIG, which follows the forking
// thread, fires when the process ends and not when a short-lived caller thread does. It blocks
// every signal, so that none meant for the process is handled on it. Never destroyed.
class ForkingThread {
 public:
  static ForkingThread& Get() {
    static ForkingThread* const thread = new ForkingThread();
    return *thread;
  }

  // Runs `job` on the forking thread and returns when it is done.
  void Run(const std::function<void()>& job) {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](const std::function<void()>** j) { return *j == nullptr; }, &job_));
    job_ = &job;
    done_ = false;
    mu_.Await(absl::Condition(&done_));
    job_ = nullptr;
  }

 private:
  ForkingThread() {
    sigset_t all, previous;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &previous);  // The new thread inherits the full mask.
    std::thread([this] { Loop(); }).detach();
    pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  }

  void Loop() {
    absl::MutexLock lock(&mu_);
    while (true) {
      mu_.Await(absl::Condition(this, &ForkingThread::HasJob));
      (*job_)();
      done_ = true;
    }
  }

  bool HasJob() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return job_ != nullptr && !done_; }

  absl::Mutex mu_;
  const std::function<void()>* job_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
};

// In the forked child: hands errno to the launcher and exits as a shell does for a program it
// cannot run.
[[noreturn]] void ReportAndExit(int error_fd) {
  const int error = errno;
  (void)!::write(error_fd, &error, sizeof(error));
  ::_exit(127);
}

// In the forked child: only async-signal-safe calls until exec. On failure, the errno goes to
// `error_fd` (close-on-exec, so the parent reads end of file when exec succeeds).
[[noreturn]] void ExecChild(char* const* args, const ChildProcess::Options& options, pid_t launcher,
                            int stdout_fd, int error_fd) {
  auto fail = [error_fd] { ReportAndExit(error_fd); };
  if (options.parent_death_signal != 0) {
    if (::prctl(PR_SET_PDEATHSIG, options.parent_death_signal) != 0) fail();
    // The launcher may have died before the signal was armed: then it never comes.
    if (::getppid() != launcher) ::_exit(128 + options.parent_death_signal);
  }
  if (!options.working_dir.empty() && ::chdir(options.working_dir.c_str()) != 0) fail();
  if (stdout_fd >= 0 && ::dup2(stdout_fd, STDOUT_FILENO) < 0) fail();
  if (!options.log_path.empty()) {
    const int log =
        ::open(options.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log < 0 || ::dup2(log, STDERR_FILENO) < 0) fail();
    if (stdout_fd < 0 && ::dup2(STDERR_FILENO, STDOUT_FILENO) < 0) fail();
  }
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::execve(args[0], args, environ);
  ReportAndExit(error_fd);
}

}  // namespace

absl::StatusOr<ChildProcess> ChildProcess::Start(const std::vector<std::string>& argv,
                                                 const Options& options) {
  // Everything the child needs is made here: after fork it may not allocate.
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  int stdout_pipe[2] = {-1, -1};
  int error_pipe[2] = {-1, -1};
  if (options.pipe_stdout && ::pipe2(stdout_pipe, O_CLOEXEC) != 0) {
    return absl::InternalError("cannot create a pipe");
  }
  if (::pipe2(error_pipe, O_CLOEXEC) != 0) {
    for (int fd : stdout_pipe) {
      if (fd >= 0) ::close(fd);
    }
    return absl::InternalError("cannot create a pipe");
  }
  const pid_t launcher = ::getpid();
  pid_t pid = -1;
  int fork_error = 0;
  ForkingThread::Get().Run([&] {
    pid = ::fork();
    if (pid == 0) ExecChild(args.data(), options, launcher, stdout_pipe[1], error_pipe[1]);
    if (pid < 0) fork_error = errno;
  });
  if (stdout_pipe[1] >= 0) ::close(stdout_pipe[1]);
  ::close(error_pipe[1]);
  int exec_error = fork_error;
  if (pid > 0) {
    ssize_t n;
    do {
      n = ::read(error_pipe[0], &exec_error, sizeof(exec_error));
    } while (n < 0 && errno == EINTR);
    if (n != sizeof(exec_error)) exec_error = 0;  // End of file: the program runs.
    if (exec_error != 0) ::waitpid(pid, nullptr, 0);
  }
  ::close(error_pipe[0]);
  if (exec_error != 0) {
    if (stdout_pipe[0] >= 0) ::close(stdout_pipe[0]);
    return absl::InternalError(
        absl::StrCat("cannot start ", argv[0], ": ", std::strerror(exec_error)));
  }
  return ChildProcess(pid, stdout_pipe[0]);
}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      stdout_fd_(std::exchange(other.stdout_fd_, -1)),
      exit_code_(other.exit_code_) {}

ChildProcess& ChildProcess::operator=(ChildProcess&& other) noexcept {
  std::swap(pid_, other.pid_);
  std::swap(stdout_fd_, other.stdout_fd_);
  std::swap(exit_code_, other.exit_code_);
  return *this;
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0 && !exit_code_) {
    ::kill(pid_, SIGKILL);
    Wait(absl::Seconds(10));
  }
  if (stdout_fd_ >= 0) ::close(stdout_fd_);
}

void ChildProcess::Signal(int signal) const {
  if (pid_ > 0 && !exit_code_) ::kill(pid_, signal);
}

std::optional<int> ChildProcess::Wait(absl::Duration timeout) {
  if (exit_code_ || pid_ <= 0) return exit_code_;
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    int status = 0;
    const pid_t done = ::waitpid(pid_, &status, WNOHANG);
    if (done == pid_) {
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      return exit_code_;
    }
    if (absl::Now() >= deadline) return std::nullopt;
    absl::SleepFor(absl::Milliseconds(10));
  }
}

bool ChildProcess::running() { return !Wait(absl::ZeroDuration()).has_value(); }

std::string ExecutableDirectory() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : exe.parent_path().string();
}

}  // namespace convoy
