// Process start-up shared by every convoy binary: Abseil flags (with --help), then glog.
#ifndef CONVOY_COMMON_INIT_H_
#define CONVOY_COMMON_INIT_H_

#include <string>
#include <vector>

namespace convoy {

// Parses flags (exits on --help or a bad flag, as Abseil does), sets the usage message, starts glog
// logging to stderr and calls KeepLargeAllocationsInHeap() and PollGrpcConnectionAttempts().
// Returns the positional arguments, argv[0] first.
std::vector<std::string> InitProcess(int argc, char** argv, const char* usage);

// Blocks SIGTERM, SIGINT and SIGHUP in the calling thread and every thread it starts afterwards, so that
// WaitForTerminationSignal() takes them synchronously. Call it before starting threads.
void BlockTerminationSignals();

// Waits for SIGTERM, SIGINT or SIGHUP (blocked by BlockTerminationSignals) and returns which arrived.
int WaitForTerminationSignal();

// LibTorch allocates model-sized temporaries on every optimizer step and every minibatch. glibc serves blocks
// that large with fresh mmaps, so each step paid first-touch page faults (Adam on the 903,941-parameter cookbook
// model: 4.3 ms a step instead of 0.9 ms). This keeps blocks up to 64 MiB in the heap and stops the heap from
// shrinking below 256 MiB of free space, so they are reused. It also keeps every thread in the one (main)
// arena: a thread arena's heap is unmapped whenever it empties, trim threshold or not, and a process whose
// gRPC threads receive model-sized messages then faulted every received byte into fresh pages (at 256
// clients a sixth of their CPU; docs/benchmarks.md, "Many agents, one server"). The learner's steps/s are
// the same either way. Process-wide and idempotent; call it before starting threads.
void KeepLargeAllocationsInHeap();

// gRPC advances a client channel's connection attempt (TCP connect, TLS handshake, HTTP/2
// SETTINGS) only while some thread polls. A call on a channel in TRANSIENT_FAILURE fails at once
// without polling, so after a server restart an agent's channels were polled only by gRPC's backup
// poller, every 5 s: each step of a reconnect waited for the next poll, and on a slow machine the
// attempts ran into gRPC's 20 s connect deadline again and again while every call kept failing
// (docs/testing.md). This makes the backup poller run every 100 ms. Process-wide; call it before
// the process's first gRPC call and before any thread starts. A
// GRPC_CLIENT_CHANNEL_BACKUP_POLL_INTERVAL_MS already in the environment wins.
void PollGrpcConnectionAttempts();

}  // namespace convoy

#endif  // CONVOY_COMMON_INIT_H_
