// A launcher for child_process_test: starts a child through ChildProcess, prints its pid on stdout,
// then waits to be killed. The child is `sleep 600`, or with --ignore_term a shell that ignores
// SIGTERM (the pid printed once it does). --outlive starts it with parent_death_signal 0, --no_kill
// with no SIGKILL after it.
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "common/support/child_process.h"

int main(int argc, char** argv) {
  convoy::ChildProcess::Options options;
  std::vector<std::string> child = {"/bin/sleep", "600"};
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--outlive") == 0) options.parent_death_signal = 0;
    if (std::strcmp(argv[i], "--no_kill") == 0) {
      options.kill_after_parent_death = absl::InfiniteDuration();
    }
    if (std::strcmp(argv[i], "--ignore_term") == 0) {
      // It says when SIGTERM is ignored: before, SIGTERM would end it.
      child = {"/bin/sh", "-c", "trap '' TERM; echo ignoring; while true; do sleep 0.2; done"};
      options.pipe_stdout = true;
    }
  }
  absl::StatusOr<convoy::ChildProcess> started = convoy::ChildProcess::Start(child, options);
  if (!started.ok()) {
    std::fprintf(stderr, "%s\n", started.status().ToString().c_str());
    return 1;
  }
  if (options.pipe_stdout) {
    char c = 0;
    while (::read(started->stdout_fd(), &c, 1) == 1 && c != '\n') {
    }
  }
  std::printf("%d\n", static_cast<int>(started->pid()));
  std::fflush(stdout);
  while (true) ::pause();
}
