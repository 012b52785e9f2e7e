#include "common/support/child_process.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
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

// The launcher's watchdog (see the class comment). Everything it runs is async-signal-safe: it is
// forked from a process with other threads and never execs.

// What the launcher writes to the watchdog for each child to watch: one write, well under
// PIPE_BUF, so records never interleave.
struct WatchRecord {
  int32_t pid;
  int32_t kill_after_ms;
};

// The children one watchdog watches at a time; those started beyond it get no SIGKILL.
constexpr int kMaxWatched = 1024;

struct Watched {
  int pidfd;  // -1 where pidfd_open is not available: then the pid is signalled.
  pid_t pid;
  int64_t kill_after_ms;
};

int64_t MonotonicMs() {
  timespec now;
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<int64_t>(now.tv_sec) * 1000 + now.tv_nsec / 1000000;
}

// Drops the children whose pidfd polled readable (they exited) from `watched`; `fds[i]` is
// watched[i]'s. Returns the new count.
int DropExited(Watched* watched, const pollfd* fds, int count) {
  int kept = 0;
  for (int i = 0; i < count; ++i) {
    if (watched[i].pidfd >= 0 && (fds[i].revents & (POLLIN | POLLHUP | POLLERR | POLLNVAL))) {
      ::close(watched[i].pidfd);
    } else {
      watched[kept++] = watched[i];
    }
  }
  return kept;
}

[[noreturn]] void RunWatchdog(int watch_fd, int max_fd) {
  // No file of the launcher's stays open here: a pipe its reader waits to close, a listening
  // socket that must refuse once the launcher is gone.
  if ((watch_fd > 0 &&
       ::syscall(SYS_close_range, 0u, static_cast<unsigned>(watch_fd) - 1, 0u) != 0) ||
      ::syscall(SYS_close_range, static_cast<unsigned>(watch_fd) + 1, ~0u, 0u) != 0) {
    for (int fd = 0; fd < max_fd; ++fd) {
      if (fd != watch_fd) ::close(fd);
    }
  }
  ::prctl(PR_SET_NAME, "convoy-watchdog");
  Watched watched[kMaxWatched];
  pollfd fds[kMaxWatched + 1];
  int count = 0;
  // While the launcher lives: take the children it starts, forget those that exit.
  while (true) {
    fds[0] = {watch_fd, POLLIN, 0};
    for (int i = 0; i < count; ++i) fds[i + 1] = {watched[i].pidfd, POLLIN, 0};
    if (::poll(fds, count + 1, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    count = DropExited(watched, fds + 1, count);
    if (fds[0].revents & POLLIN) {
      WatchRecord record;
      const ssize_t n = ::read(watch_fd, &record, sizeof(record));
      if (n == sizeof(record)) {
        if (count < kMaxWatched) {
          const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, record.pid, 0u));
          watched[count++] = {pidfd, record.pid, record.kill_after_ms};
        }
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      break;  // End of file: the launcher died.
    }
    if (fds[0].revents & (POLLHUP | POLLERR | POLLNVAL)) break;
  }
  // The launcher died, and the kernel sent each child its parent-death signal: wait for them, up to
  // each one's bound, and SIGKILL the rest.
  const int64_t died = MonotonicMs();
  while (count > 0) {
    const int64_t now = MonotonicMs();
    int64_t wait_ms = INT_MAX;
    int kept = 0;
    for (int i = 0; i < count; ++i) {
      const int64_t left = died + watched[i].kill_after_ms - now;
      if (left > 0) {
        wait_ms = std::min(wait_ms, left);
        watched[kept++] = watched[i];
        continue;
      }
      if (watched[i].pidfd >= 0) {
        ::syscall(SYS_pidfd_send_signal, watched[i].pidfd, SIGKILL, nullptr, 0u);
        ::close(watched[i].pidfd);
      } else {
        ::kill(watched[i].pid, SIGKILL);
      }
    }
    count = kept;
    if (count == 0) break;
    for (int i = 0; i < count; ++i) fds[i] = {watched[i].pidfd, POLLIN, 0};
    if (::poll(fds, count, static_cast<int>(wait_ms)) > 0) count = DropExited(watched, fds, count);
  }
  ::_exit(0);
}

// Starts this process's watchdog; returns the write end of the pipe to it, -1 when it cannot be
// started.
int StartWatchdog() {
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return -1;
  rlimit files;
  const int max_fd = ::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur != RLIM_INFINITY
                         ? static_cast<int>(std::min<rlim_t>(files.rlim_cur, 1 << 20))
                         : 1 << 16;
  const pid_t watchdog = ::fork();
  if (watchdog == 0) RunWatchdog(pipe_fds[0], max_fd);
  ::close(pipe_fds[0]);
  if (watchdog < 0) {
    ::close(pipe_fds[1]);
    return -1;
  }
  return pipe_fds[1];
}

// The write end of the pipe to this process's watchdog, started by the first call from any thread
// (once: a static's initialisation is thread-safe); -1 when it cannot be started.
int WatchdogPipe() {
  static const int write_fd = StartWatchdog();
  return write_fd;
}

// On the forking thread, right after the fork (so `child` is not reaped yet and its pid is its
// own): hands `child` to the watchdog. A watchdog that is gone is not replaced: the write fails
// (EPIPE; the SIGPIPE stays blocked on this thread) and the child has its parent-death signal only.
void Watch(pid_t child, absl::Duration kill_after) {
  if (kill_after == absl::InfiniteDuration()) return;
  const int fd = WatchdogPipe();
  if (fd < 0) return;
  const WatchRecord record = {static_cast<int32_t>(child),
                              static_cast<int32_t>(std::clamp<int64_t>(
                                  absl::ToInt64Milliseconds(kill_after), 0, INT32_MAX))};
  (void)!::write(fd, &record, sizeof(record));
}

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
    if (pid > 0 && options.parent_death_signal != 0) Watch(pid, options.kill_after_parent_death);
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

bool LauncherDied(pid_t launcher) {
  int death_signal = 0;
  if (::prctl(PR_GET_PDEATHSIG, &death_signal) != 0 || death_signal == 0) return false;
  if (::getppid() != launcher) return true;
  // The parent-death signal comes when the launcher's forking thread ends, but a dying process
  // stays this one's parent until its last thread has torn its memory down (a second or more for
  // a large one on a loaded machine). Its main thread is a zombie meanwhile.
  // (A parent outside this PID namespace is 0 here, and has no /proc entry to read.)
  std::ifstream stat(absl::StrCat("/proc/", launcher, "/stat"));
  std::string line;
  if (launcher <= 1 || !std::getline(stat, line)) return false;
  const size_t name_end = line.rfind(')');
  return name_end != std::string::npos && name_end + 2 < line.size() &&
         (line[name_end + 2] == 'Z' || line[name_end + 2] == 'X');
}

std::string ExecutableDirectory() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : exe.parent_path().string();
}

}  // namespace convoy
