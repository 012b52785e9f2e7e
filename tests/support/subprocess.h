// Subprocess: starts a real convoy binary for a test, and stops it the way a user or a crash would.
#ifndef CONVOY_TESTS_SUPPORT_SUBPROCESS_H_
#define CONVOY_TESTS_SUPPORT_SUBPROCESS_H_

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/support/child_process.h"

namespace convoy::testing {

// A real convoy binary started by a test, stdout and stderr appended to a log file, run in
// `working_dir` (empty: the test's). It dies with the test (ChildProcess's parent-death signal).
class Subprocess {
 public:
  static absl::StatusOr<Subprocess> Start(const std::vector<std::string>& argv,
                                          const std::string& log_path,
                                          const std::string& working_dir = "") {
    ChildProcess::Options options;
    options.log_path = log_path;
    options.working_dir = working_dir;
    absl::StatusOr<ChildProcess> child = ChildProcess::Start(argv, options);
    if (!child.ok()) return child.status();
    return Subprocess(*std::move(child));
  }
  void Signal(int signal) const { child_.Signal(signal); }
  std::optional<int> Wait(absl::Duration timeout) { return child_.Wait(timeout); }
  bool running() { return child_.running(); }
  pid_t pid() const { return child_.pid(); }

 private:
  explicit Subprocess(ChildProcess child) : child_(std::move(child)) {}
  ChildProcess child_;
};

// Waits until `path` exists and is non-empty, then returns its first line. NOT_FOUND on timeout.
absl::StatusOr<std::string> WaitForFileLine(const std::string& path, absl::Duration timeout);

// Polls `condition` every 50 ms until it holds (true) or `timeout` passes (false).
bool WaitUntil(const std::function<bool()>& condition, absl::Duration timeout);

// A fresh empty directory under the test temp dir.
std::string MakeTempDir(const std::string& prefix);

// Whole contents of a file, or "" when unreadable.
std::string ReadWholeFile(const std::string& path);

}  // namespace convoy::testing

#endif  // CONVOY_TESTS_SUPPORT_SUBPROCESS_H_
