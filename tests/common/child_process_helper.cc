// A launcher for child_process_test: starts `sleep 600` through ChildProcess, prints its pid on
// stdout, then waits to be killed. --outlive starts it with parent_death_signal 0.
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "common/child_process.h"

int main(int argc, char** argv) {
  convoy::ChildProcess::Options options;
  if (argc > 1 && std::strcmp(argv[1], "--outlive") == 0) options.parent_death_signal = 0;
  absl::StatusOr<convoy::ChildProcess> child =
      convoy::ChildProcess::Start({"/bin/sleep", "600"}, options);
  if (!child.ok()) {
    std::fprintf(stderr, "%s\n", child.status().ToString().c_str());
    return 1;
  }
  std::printf("%d\n", static_cast<int>(child->pid()));
  std::fflush(stdout);
  while (true) ::pause();
}
