// Process start-up shared by every convoy binary: Abseil flags (with --help), then glog.
#ifndef CONVOY_COMMON_INIT_H_
#define CONVOY_COMMON_INIT_H_

#include <string>
#include <vector>

namespace convoy {

// Parses flags (exits on --help or a bad flag, as Abseil does), sets the usage message, starts glog
// logging to stderr and calls KeepLargeAllocationsInHeap(). Returns the positional arguments, argv[0] first.
std::vector<std::string> InitProcess(int argc, char** argv, const char* usage);

// Blocks SIGTERM, SIGINT and SIGHUP in the calling thread and every thread it starts afterwards, so that
// WaitForTerminationSignal() takes them synchronously. Call it before starting threads.
void BlockTerminationSignals();

// Waits for SIGTERM, SIGINT or SIGHUP (blocked by BlockTerminationSignals) and returns which arrived.
int WaitForTerminationSignal();

// LibTorch allocates model-sized temporaries on every optimizer step and every minibatch. glibc serves blocks
// that large with fresh mmaps, so each step paid first-touch page faults (Adam on the 903,941-parameter cookbook
// model: 4.3 ms a step instead of 0.9 ms). This keeps blocks up to 64 MiB in the heap and stops the heap from
// shrinking below 256 MiB of free space, so they are reused. Process-wide and idempotent.
void KeepLargeAllocationsInHeap();

}  // namespace convoy

#endif  // CONVOY_COMMON_INIT_H_
