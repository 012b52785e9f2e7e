// Process start-up shared by every convoy binary: Abseil flags (with --help), then glog.
#ifndef CONVOY_COMMON_SUPPORT_INIT_H_
#define CONVOY_COMMON_SUPPORT_INIT_H_

#include <string>
#include <vector>

namespace convoy {

// What a binary's start changes in its process beyond what every binary does. Each choice was measured
// for the binaries that make it (docs/benchmarks.md); the others start without it.
struct ProcessPolicy {
  // UseHugePagesInHeap(): convoy_ps and its benchmark, whose gRPC threads copy model-sized messages
  // for up to 256 clients ("Huge pages"). It starts the process a second time.
  bool huge_pages_in_heap = false;
};

// Calls UseHugePagesInHeap() where `policy` asks for it (which may start the process again), parses
// flags (exits on --help or a bad flag, as Abseil does), sets the usage message, starts glog logging to
// stderr and calls KeepLargeAllocationsInHeap() and PollGrpcConnectionAttempts().
// Returns the positional arguments, argv[0] first.
std::vector<std::string> InitProcess(int argc, char** argv, const char* usage,
                                     ProcessPolicy policy = {});

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

// Transparent huge pages for the heap. Where the kernel gives them only to memory that asks for
// them (/sys/kernel/mm/transparent_hugepage/enabled: madvise, Debian's default), a convoy process's
// model-sized buffers (gradients, weights, pull buffers, gRPC's received slices) lay in 4 KiB
// pages: at 256 clients on one machine, 2.8 GB of them, and the copies through them ran into TLB
// misses. glibc asks for huge pages for what it allocates with the tunable glibc.malloc.hugetlb=1,
// which it reads only at start-up: so when GLIBC_TUNABLES does not name glibc.malloc.hugetlb, this
// adds it and starts the same executable again with the same arguments (once: the second start
// finds it named). A GLIBC_TUNABLES that names it (e.g. glibc.malloc.hugetlb=0) is left as it is,
// as is a kernel with huge pages "never" or none, and a secure-execution process (setuid, file
// capabilities: the loader drops GLIBC_TUNABLES there); if the start fails, the process goes on as
// it was. docs/benchmarks.md ("Huge pages") has the figures. Call it first in main, before any
// thread starts.
void UseHugePagesInHeap(char** argv);

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

#endif  // CONVOY_COMMON_SUPPORT_INIT_H_
