// Subprocess: starts a real convoy binary for a test, and stops it the way a user or a crash would.
#ifndef CONVOY_TESTS_SUPPORT_SUBPROCESS_H_
#define CONVOY_TESTS_SUPPORT_SUBPROCESS_H_

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace convoy::testing {

class Subprocess {
 public:
  // Starts `argv` (argv[0] is the program path) with stdout and stderr appended to `log_path`.
  static absl::StatusOr<Subprocess> Start(const std::vector<std::string>& argv,
                                          const std::string& log_path);
  Subprocess(Subprocess&& other) noexcept;
  Subprocess& operator=(Subprocess&& other) noexcept;
  ~Subprocess();  // SIGKILLs and reaps a process still running.

  void Signal(int signal) const;
  // Waits for the exit; returns the exit code (128 + N when killed by signal N), or nullopt on timeout.
  std::optional<int> Wait(absl::Duration timeout);
  bool running();
  pid_t pid() const { return pid_; }

 private:
  explicit Subprocess(pid_t pid) : pid_(pid) {}
  pid_t pid_ = -1;
  std::optional<int> exit_code_;
};

// Waits until `path` exists and is non-empty, then returns its first line. NOT_FOUND on timeout.
absl::StatusOr<std::string> WaitForFileLine(const std::string& path, absl::Duration timeout);

// A fresh empty directory under the test temp dir.
std::string MakeTempDir(const std::string& prefix);

// Whole contents of a file, or "" when unreadable.
std::string ReadWholeFile(const std::string& path);

}  // namespace convoy::testing

#endif  // CONVOY_TESTS_SUPPORT_SUBPROCESS_H_
