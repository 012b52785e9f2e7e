// ChildProcess: starts a program, signals it, waits for it. convoy_train starts convoy_ps and its agents
// with it; tests start real binaries with it.
#ifndef CONVOY_COMMON_CHILD_PROCESS_H_
#define CONVOY_COMMON_CHILD_PROCESS_H_

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace convoy {

class ChildProcess {
 public:
  struct Options {
    std::string log_path;       // stderr (and stdout unless piped) appended here; empty: inherit.
    bool pipe_stdout = false;   // stdout readable through stdout_fd().
  };

  // Starts `argv` (argv[0] is the program path) with no signals blocked. Errors: INTERNAL naming the program.
  static absl::StatusOr<ChildProcess> Start(const std::vector<std::string>& argv,
                                            const Options& options);
  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&& other) noexcept;
  ~ChildProcess();  // SIGKILLs and reaps a process still running.

  void Signal(int signal) const;
  // Waits for the exit; returns the exit code (128 + N when killed by signal N), or nullopt on timeout.
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

// The directory of the running executable (/proc/self/exe), for finding sibling binaries.
std::string ExecutableDirectory();

}  // namespace convoy

#endif  // CONVOY_COMMON_CHILD_PROCESS_H_
