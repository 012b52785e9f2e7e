// ChildProcess: starts a program, signals it, waits for it. convoy_train starts convoy_ps and its
// agents with it; tests start real binaries with it.
#ifndef CONVOY_COMMON_SUPPORT_CHILD_PROCESS_H_
#define CONVOY_COMMON_SUPPORT_CHILD_PROCESS_H_

#include <signal.h>
#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace convoy {

// A launcher's children do not outlive it, however it ends (a crash, SIGKILL, a closed terminal):
// each gets `parent_death_signal` from the kernel when this process dies (PR_SET_PDEATHSIG), and
// one still running `kill_after_parent_death` later gets SIGKILL from the launcher's watchdog. The
// kernel sends the first signal when the *thread* that forked the child ends, so every child is
// forked by one thread that lives as long as the process, whichever thread calls Start(); and a
// child whose launcher died before the signal was armed exits at once instead of running
// unwatched. The watchdog is a process forked (not exec'd) from the launcher at its first Start:
// it holds no file of the launcher's but the read end of a pipe the launcher writes each child's
// pid to, and when that pipe closes (the launcher died, however) it waits for the children still
// running, up to their bound, and SIGKILLs the rest (by pidfd, so a pid reused meanwhile is
// safe). It ignores every signal but SIGKILL, and is named "convoy-watchdog" (/proc/<pid>/comm).
// Children stay in the launcher's process group, so a signal to that group (the terminal's
// Ctrl-C, `kill -TERM -<pgid>`) reaches them as well as the launcher.
class ChildProcess {
 public:
  // A launcher's children are gone within 2 s of its death: SIGTERM at once, SIGKILL after this,
  // leaving the kernel the rest to tear a large process down.
  static constexpr absl::Duration kKillAfterParentDeath = absl::Milliseconds(1500);

  struct Options {
    std::string log_path;      // stderr (and stdout unless piped) appended here; empty: inherit.
    bool pipe_stdout = false;  // stdout readable through stdout_fd().
    std::string working_dir;   // The child's working directory; empty: this process's.
    // What the child receives when this process dies; 0: nothing, it may outlive this process.
    // SIGTERM rather than SIGKILL: convoy's binaries stop cleanly on it (an agent's final sync
    // ends at once when its launcher died; convoy_ps drains briefly and writes its final
    // checkpoint).
    int parent_death_signal = SIGTERM;
    // With a parent_death_signal: how long after this process's death the child may take to stop
    // on it before the watchdog SIGKILLs it. InfiniteDuration: no SIGKILL.
    absl::Duration kill_after_parent_death = kKillAfterParentDeath;
  };

  // Starts `argv` (argv[0] is the program path) with no signals blocked. Thread-safe. Errors:
  // INTERNAL naming the program (also when it cannot be executed, or working_dir or log_path
  // cannot be opened).
  static absl::StatusOr<ChildProcess> Start(const std::vector<std::string>& argv,
                                            const Options& options);
  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&& other) noexcept;
  ~ChildProcess();  // SIGKILLs and reaps a process still running.

  void Signal(int signal) const;
  // Waits for the exit; returns the exit code (128 + N when killed by signal N), or nullopt on
  // timeout.
  std::optional<int> Wait(absl::Duration timeout);
  bool running();
  pid_t pid() const { return pid_; }
  // The read end of the child's stdout pipe (-1 unless pipe_stdout); owned by this object.
  int stdout_fd() const { return stdout_fd_; }

 private:
  ChildProcess(pid_t pid, int stdout_fd) : pid_(pid), stdout_fd_(stdout_fd) {}
  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  std::optional<int> exit_code_;
};

// In a process that a ChildProcess started: whether its launcher died or is dying, `launcher`
// being the parent it had at start (it is no longer the parent, or its main thread has ended).
// False for a process without a parent-death signal: one not started to die with its launcher (its
// parent shell exiting is no launcher's death). The parent-death signal has come or is on its way,
// and a watchdog's SIGKILL follows kKillAfterParentDeath after the death.
bool LauncherDied(pid_t launcher);

// The directory of the running executable (/proc/self/exe), for finding sibling binaries.
std::string ExecutableDirectory();

}  // namespace convoy

#endif  // CONVOY_COMMON_SUPPORT_CHILD_PROCESS_H_
