// convoy_bench_ps: how many push+pull cycles per second a parameter server sustains for a model,
// with 1 to many concurrent clients over loopback, set against the limit of the machine it runs on.
//
// A cycle is what an agent does per update: push a gradient computed on the version it holds, then
// pull the weights if they are newer. Each client has its own PsClient on its own gRPC channel (its
// own TCP connection). The limit is measured in the same run, right before each measurement of
// cycles: loopback TCP bytes/s between two threads, and the rate of the optimizer's apply on a
// model-sized buffer; the limit in cycles/s is min(tcp_bytes_per_s / bytes_per_cycle, apply_per_s),
// with bytes_per_cycle = push bytes + pull bytes. Beside it, the server's serial ceiling: apply
// plus the publish copy, the one step no two pushes can share.
//
// A shared machine's speed drifts by tens of percent within a minute, so a limit measured once and
// cycles measured later are not a ratio anyone can act on. Each configuration is measured
// --repeats times, the repeats of all configurations interleaved (repeat 1 of every
// configuration, then repeat 2, ...), each repeat's fraction taken against the limit measured just
// before it; the table reports medians and the spread (min-max) over the repeats.
//
// The servers measured are convoy_ps processes the bench starts itself (--servers: by default the
// convoy_ps beside it twice, stepping once per push and with its default batching), so that each
// server's resident memory, CPU time and drained batch sizes are its own; or an external server
// (--ps). The servers' repeats are interleaved with the rest.
//
// Prints a table, then `RESULT key=value` lines. Not a test: it never fails on a slow machine.
#include <arpa/inet.h>
#include <glog/logging.h>
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "agent/client/client_security_settings.h"
#include "agent/client/ps_client.h"
#include "agent/client/shard_worker.h"
#include "common/model/model_registry.h"
#include "common/model/shard_map.h"
#include "common/settings/flag_ranges.h"
#include "common/support/child_process.h"
#include "common/support/files.h"
#include "common/support/init.h"
#include "common/support/status_macros.h"
#include "common/wire/tensor_encoding.h"
#include "param_server/core/optimizer.h"
#include "param_server/core/weight_store.h"

ABSL_FLAG(std::string, model, "cookbook",
          "Model whose size the cycles move (cookbook: 903,941 parameters).");
ABSL_FLAG(std::string, ps, "",
          "An external parameter server host:port to measure, or every shard's host:port,... of a "
          "sharded one in shard order. Empty: the --servers this bench starts.");
ABSL_FLAG(std::string, servers, "batch1=--max_pushes_per_step=1;default=",
          "The convoy_ps servers to start and measure, ';'-separated, each LABEL=[BINARY] [FLAGS]: "
          "BINARY (a path; default the convoy_ps beside this bench) started on 127.0.0.1 with "
          "--insecure --port=0 --model --optimizer and FLAGS. E.g. "
          "'before=/tmp/old/convoy_ps;batch1=--max_pushes_per_step=1;default='. With one server, "
          "RESULT keys carry no label.");
ABSL_FLAG(std::vector<std::string>, clients,
          std::vector<std::string>({"1", "4", "16", "64", "256"}),
          "Concurrent client counts to measure, comma-separated.");
ABSL_FLAG(std::vector<std::string>, encodings, std::vector<std::string>({"fp32", "bf16"}),
          "Push encodings to measure, comma-separated (fp32, bf16). Pulls are always fp32.");
ABSL_FLAG(double, seconds, 5, "Measured seconds per configuration.");
ABSL_FLAG(double, warmup_seconds, 1, "Unmeasured seconds before each configuration's measurement.");
ABSL_FLAG(std::string, window_dir, "",
          "For clients in several processes (on several nodes sharing a file system): once its "
          "clients are warm, this process creates <dir>/warm.<pid> and waits (at most 5 minutes) "
          "for <dir>/go, which holds the Unix time in microseconds at which every process's "
          "measured window opens; whoever runs the processes writes it once all are warm. "
          "Empty: the window opens after this process's own warm-up.");
ABSL_FLAG(int, clients_per_process, 64,
          "Clients per process: more clients than this run in worker processes of this bench, each "
          "with this many (or fewer), as agents are processes of their own; 0: all in this one.");
ABSL_FLAG(bool, worker, false,
          "Internal: run --clients clients against --ps and report their cycles on stdout (the "
          "worker processes this bench starts itself).");
ABSL_FLAG(int, worker_first_index, 0, "Internal: the agent index of a worker's first client.");
ABSL_FLAG(std::string, worker_tag, "", "Internal: what a worker's clients' agent ids carry.");
ABSL_FLAG(std::string, worker_go_file, "",
          "Internal: where a worker, its clients joined (it says READY on stdout), waits for the "
          "Unix time its measured window opens.");
ABSL_FLAG(convoy::ps::Optimizer, optimizer, convoy::ps::Optimizer::kAdam,
          "Optimizer of the in-process server and of the apply limit.");
ABSL_FLAG(int64_t, tcp_bytes, int64_t{256} << 20, "Bytes each loopback TCP measurement sends.");
ABSL_FLAG(int, tcp_repeats, 2,
          "Loopback TCP measurements before each measurement of cycles; the fastest is the limit.");
ABSL_FLAG(double, apply_seconds, 0.5,
          "Seconds each apply-rate measurement runs (apply alone, then apply + publish).");
ABSL_FLAG(int, repeats, 3,
          "Measurements of each configuration, interleaved with the other configurations' and each "
          "after its own measurement of the limit; the table reports medians and spreads.");
ABSL_FLAG(std::vector<std::string>, client_channel_args, {},
          "Extra integer gRPC channel arguments for every client channel, name=value,... (to "
          "compare transport settings; e.g. grpc.http2.bdp_probe=0).");

// The settings this binary shares with others, as flags (common/support/settings_table.h).
CONVOY_SETTINGS_FLAGS(CONVOY_CLIENT_SECURITY_SETTINGS, convoy::agent::ClientSecuritySettings,
                      ClientSecuritySettingsFromFlags)

namespace convoy::bench {
namespace {

constexpr size_t kTcpWriteBytes = size_t{1} << 20;
constexpr int kApplyWarmupSteps = 3;
// Gradients small enough that hours of Adam steps keep the weights finite.
constexpr float kGradientScale = 1e-3f;
// Room for a chunk's header fields around its payload, as PsClient and the server allow.
constexpr int kMaxMessageBytes = static_cast<int>(kMaxChunkPayloadBytes) + 1024;

// Distinct per channel ever made, so gRPC never shares a connection between two clients.
std::atomic<int> next_channel_id{0};

// The machine's limit.

absl::Status ErrnoStatus(const char* what) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(errno)));
}

// One transfer of `total` bytes from a writer thread to a reader thread over a 127.0.0.1 socket
// pair. Returns bytes per second.
absl::StatusOr<double> MeasureLoopbackTcp(int64_t total) {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  if (listener < 0) return ErrnoStatus("socket");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof(address);
  if (bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      listen(listener, 1) != 0 ||
      getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    absl::Status status = ErrnoStatus("bind/listen");
    close(listener);
    return status;
  }
  const int sender = socket(AF_INET, SOCK_STREAM, 0);
  if (sender < 0 || connect(sender, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    absl::Status status = ErrnoStatus("connect");
    if (sender >= 0) close(sender);
    close(listener);
    return status;
  }
  const int receiver = accept(listener, nullptr, nullptr);
  close(listener);
  if (receiver < 0) {
    close(sender);
    return ErrnoStatus("accept");
  }

  std::atomic<bool> write_failed{false};
  const absl::Time start = absl::Now();
  std::thread writer([&] {
    std::vector<char> buffer(kTcpWriteBytes, 'x');
    int64_t sent = 0;
    while (sent < total) {
      const size_t n = static_cast<size_t>(std::min<int64_t>(buffer.size(), total - sent));
      const ssize_t w = send(sender, buffer.data(), n, MSG_NOSIGNAL);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        write_failed = true;
        break;
      }
      sent += w;
    }
    shutdown(sender, SHUT_WR);
  });
  std::vector<char> buffer(kTcpWriteBytes);
  int64_t received = 0;
  while (received < total) {
    const ssize_t r = recv(receiver, buffer.data(), buffer.size(), 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    received += r;
  }
  const absl::Duration elapsed = absl::Now() - start;
  writer.join();
  close(sender);
  close(receiver);
  if (write_failed || received != total) {
    return absl::InternalError(
        absl::StrCat("loopback transfer stopped after ", received, " of ", total, " bytes"));
  }
  return static_cast<double>(total) / absl::ToDoubleSeconds(elapsed);
}

struct ApplyRates {
  double apply_per_s = 0;  // FlatOptimizer::Apply alone.
  double apply_publish_per_s =
      0;  // Apply then WeightStore::Publish, the server's serialised writer step.
};

// Fills `out` with small pseudo-random gradients, cheaply (xorshift), so many clients start
// quickly.
void FillGradient(uint64_t seed, std::vector<float>* out) {
  uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
  for (float& v : *out) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    v = kGradientScale * (static_cast<float>(state >> 40) / static_cast<float>(1 << 24) - 0.5f);
  }
}

absl::StatusOr<ApplyRates> MeasureApply(size_t parameters, ps::Optimizer optimizer_kind,
                                        absl::Duration duration) {
  ps::WeightStore store(std::vector<float>(parameters, 0.01f), 0);
  ps::OptimizerOptions options;
  options.kind = optimizer_kind;
  CONVOY_ASSIGN_OR_RETURN(std::unique_ptr<ps::FlatOptimizer> optimizer,
                          ps::FlatOptimizer::Create(options, store.mutable_master(), store.size()));
  std::vector<float> gradient(parameters);
  FillGradient(0, &gradient);

  uint64_t version = 0;
  auto rate = [&](bool publish) {
    for (int i = 0; i < kApplyWarmupSteps; ++i) optimizer->Apply(gradient.data(), 1.0);
    uint64_t steps = 0;
    const absl::Time start = absl::Now();
    absl::Time now = start;
    while (now - start < duration) {
      optimizer->Apply(gradient.data(), 1.0);
      if (publish) store.Publish(++version);
      ++steps;
      now = absl::Now();
    }
    return static_cast<double>(steps) / absl::ToDoubleSeconds(now - start);
  };
  ApplyRates rates;
  rates.apply_per_s = rate(/*publish=*/false);
  rates.apply_publish_per_s = rate(/*publish=*/true);
  return rates;
}

// Push+pull cycles.

struct ClientTally {
  uint64_t cycles = 0;  // Completed inside the measured window.
  uint64_t rejected = 0;
  std::vector<double> latencies_ms;
  absl::Status error;
};

struct CycleResult {
  double cycles_per_s = 0;
  double client_cpu_ms_per_cycle = 0;  // The clients' processes' CPU time in the window, per cycle.
  double p50_ms = 0;
  double p99_ms = 0;
  uint64_t rejected = 0;
};

// The clients' TLS and token: plaintext for the in-process server, the security flags for --ps.
ClientSecurity g_security;
// --client_channel_args, parsed.
std::vector<std::pair<std::string, int>> g_channel_args;

absl::Status ParseChannelArgs(const std::vector<std::string>& values) {
  for (const std::string& arg : values) {
    const std::pair<std::string, std::string> kv = absl::StrSplit(arg, absl::MaxSplits('=', 1));
    int value = 0;
    if (kv.first.empty() || !absl::SimpleAtoi(kv.second, &value)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--client_channel_args: '", arg, "' is not name=integer (e.g. grpc.http2.bdp_probe=0)"));
    }
    g_channel_args.emplace_back(kv.first, value);
  }
  return absl::OkStatus();
}

std::shared_ptr<grpc::Channel> DistinctChannel(const std::string& address) {
  grpc::ChannelArguments args;
  if (!g_security.tls_server_name.empty())
    args.SetSslTargetNameOverride(g_security.tls_server_name);
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  // A channel argument unique to this channel makes its subchannel (its TCP connection) its own.
  args.SetInt("convoy.bench.channel_id", next_channel_id.fetch_add(1));
  for (const auto& [name, value] : g_channel_args) args.SetInt(name, value);
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      MakeChannelCredentials(g_security);
  CHECK(credentials.ok()) << credentials.status();  // Checked when g_security was set.
  return grpc::CreateCustomChannel(address, *credentials, args);
}

const char* Name(TensorEncoding encoding) {
  return encoding == TensorEncoding::kBf16 ? "bf16" : "fp32";
}

// Nearest-rank percentile of sorted values.
double Percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const size_t rank = static_cast<size_t>(std::ceil(p * static_cast<double>(sorted.size())));
  return sorted[std::min(sorted.size() - 1, rank == 0 ? 0 : rank - 1)];
}

// What clients in one process measured: their cycles, every cycle's latency, and the process's CPU
// time in the window.
struct ProcessTally {
  absl::Time window_start;
  double cpu_seconds = 0;
  uint64_t cycles = 0;
  uint64_t rejected = 0;
  std::vector<double> latencies_ms;
};

// This process's CPU time so far (user + system, every thread).
double OwnCpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

// Cycles every client completes before the measured window may open: a client's first cycles
// touch its buffers and its connection's for the first time, which is not the steady state.
constexpr int kWarmCycles = 3;

// Runs `clients` agents in this process, agent indexes from `first_index`, doing push+pull cycles.
// Each starts after its share of `stagger`. Once every client has completed kWarmCycles cycles and
// `warmup` has passed, the window's start is decided: by `decide_window` (given the earliest it may
// be), else as soon as possible; cycles that end in the window count.
absl::StatusOr<ProcessTally> RunClients(
    const std::string& address, const ModelInfo& model, TensorEncoding encoding, int clients,
    int first_index, const std::string& tag, absl::Duration warmup, absl::Duration measured,
    absl::Duration stagger, const std::function<absl::Time(absl::Time)>& decide_window = {}) {
  std::vector<ClientTally> tallies(clients);
  absl::BlockingCounter joined(clients);
  absl::BlockingCounter warm(clients);
  // The window's start, once decided (microseconds since the epoch; 0: not yet).
  std::atomic<int64_t> window_us{0};

  // A sharded server (several addresses, in shard order): each client has one PsClient per shard
  // and a cycle pushes and pulls every shard's range, all shards at once, as an agent's sync
  // does.
  const std::vector<std::string> shards = absl::StrSplit(address, ',');
  CONVOY_ASSIGN_OR_RETURN(ShardMap map, MakeShardMap(model, static_cast<uint32_t>(shards.size())));

  auto run_client = [&](int index) {
    ClientTally& tally = tallies[index];
    int cycles_done = 0;
    // Every way out counts the client warm, so that the others' window is decided all the same.
    auto warmed = [&] {
      if (cycles_done++ == kWarmCycles - 1) warm.DecrementCount();
    };
    struct Shard {
      std::unique_ptr<agent::PsClient> client;
      std::vector<float> weights;
      uint64_t version = 0;
      uint64_t incarnation = 0;
    };
    std::vector<Shard> mine(shards.size());
    std::vector<float> gradient(model.parameter_count);
    FillGradient(static_cast<uint64_t>(first_index + index) + 1, &gradient);
    absl::Status status;
    for (size_t s = 0; s < shards.size() && status.ok(); ++s) {
      agent::PsClientOptions options;
      options.address = shards[s];
      options.agent_id = absl::StrCat("bench-", tag, "-", first_index + index);
      options.hostname = "convoy_bench_ps";
      options.agent_index = static_cast<uint32_t>(first_index + index);
      options.model_fingerprint = model.fingerprint;
      options.push_encoding = encoding;
      options.security = g_security;
      if (shards.size() > 1) {
        options.num_shards = static_cast<uint32_t>(shards.size());
        options.shard_index = static_cast<uint32_t>(s);
        options.shard_map_digest = map.digest;
      }
      mine[s].client = std::make_unique<agent::PsClient>(options, DistinctChannel(shards[s]));
      status = mine[s].client->Join().status();
      if (!status.ok()) break;
      absl::StatusOr<agent::PullResult> first =
          mine[s].client->Pull(0, 0, v1::NETWORK_ONLINE, &mine[s].weights);
      if (first.ok()) {
        mine[s].version = first->version;
        mine[s].incarnation = first->incarnation;
      } else {
        status = first.status();
      }
    }
    joined.DecrementCount();
    if (!status.ok()) {
      tally.error = status;
      while (cycles_done < kWarmCycles) warmed();
      return;
    }
    // Agents do not start in step: each client's first cycle is put off by its own share of the
    // stagger (spread evenly, by index, over all the clients of all processes), so that they do
    // not push, then pull, all together in waves that a server's fair queues would keep going.
    const double share = std::fmod(0.6180339887 * (first_index + index), 1.0);
    absl::SleepFor(stagger * share);
    // One shard's half of a cycle: push its range, pull it if newer. Accepted or not.
    auto cycle_on = [&](size_t s) -> absl::StatusOr<bool> {
      Shard& shard = mine[s];
      const ShardRange& range = map.ranges[s];
      // As an agent's sync does: the pull's request right behind the push's last chunk.
      agent::PsClient::PushPull done = shard.client->PushThenPull(
          gradient.data() + range.begin, range.size(), shard.version, /*minibatch_count=*/1,
          shard.incarnation, shard.version, shard.incarnation, v1::NETWORK_ONLINE, &shard.weights);
      CONVOY_ASSIGN_OR_RETURN(PushAnswer pushed, std::move(done.pushed));
      if (!done.pulled.has_value()) return absl::InternalError("a push answered without its pull");
      CONVOY_ASSIGN_OR_RETURN(agent::PullResult pulled, std::move(*done.pulled));
      shard.version = pulled.version;
      shard.incarnation = pulled.incarnation;
      return pushed.accepted;
    };
    tally.latencies_ms.reserve(4096);
    // Each further shard's half runs on a thread of that shard's own for the whole run, as an
    // agent's sync has one per server (agent/client/shard_worker.h): no thread is started per
    // cycle.
    std::vector<std::unique_ptr<agent::ShardWorker>> workers;
    for (size_t s = 1; s < shards.size(); ++s)
      workers.push_back(std::make_unique<agent::ShardWorker>());
    std::vector<absl::StatusOr<bool>> done(shards.size(), absl::StatusOr<bool>(false));
    while (true) {
      const absl::Time begin = absl::Now();
      for (size_t s = 1; s < shards.size(); ++s) {
        workers[s - 1]->Start([&, s] { done[s] = cycle_on(s); });
      }
      done[0] = cycle_on(0);
      for (auto& worker : workers) worker->Wait();
      bool accepted = true;
      for (const absl::StatusOr<bool>& d : done) {
        if (!d.ok()) {
          tally.error = d.status();
          while (cycles_done < kWarmCycles) warmed();
          return;
        }
        accepted = accepted && *d;
      }
      const absl::Time end = absl::Now();
      warmed();
      const int64_t us = window_us.load();
      if (us == 0) continue;  // Warming up.
      const absl::Time start = absl::FromUnixMicros(us);
      if (end > start + measured) break;
      if (end >= start) {
        ++tally.cycles;
        if (!accepted) ++tally.rejected;
        tally.latencies_ms.push_back(absl::ToDoubleMilliseconds(end - begin));
      }
    }
  };

  std::vector<std::thread> threads;
  threads.reserve(clients);
  const absl::Time started = absl::Now();
  for (int i = 0; i < clients; ++i) threads.emplace_back(run_client, i);
  joined.Wait();
  warm.Wait();
  absl::SleepFor(started + warmup - absl::Now());
  // Clients in other processes measure the same seconds: `decide_window` waits for them.
  const absl::Time earliest = absl::Now() + absl::Milliseconds(100);
  const absl::Time start = decide_window ? decide_window(earliest) : earliest;
  window_us.store(absl::ToUnixMicros(start));
  ProcessTally result;
  absl::SleepFor(start - absl::Now());
  const double cpu_before = OwnCpuSeconds();
  absl::SleepFor(start + measured - absl::Now());
  result.cpu_seconds = OwnCpuSeconds() - cpu_before;
  for (std::thread& t : threads) t.join();

  result.window_start = start;
  for (const ClientTally& tally : tallies) {
    if (!tally.error.ok()) return tally.error;
    result.cycles += tally.cycles;
    result.rejected += tally.rejected;
    result.latencies_ms.insert(result.latencies_ms.end(), tally.latencies_ms.begin(),
                               tally.latencies_ms.end());
  }
  return result;
}

// This bench's own arguments, for its worker processes.
std::vector<std::string> g_argv;

// Reads a worker's stdout up to and including the line `until` (or to its end when empty).
std::string ReadWorker(ChildProcess& worker, absl::string_view until) {
  std::string out;
  char c = 0;
  while (read(worker.stdout_fd(), &c, 1) == 1) {
    out.push_back(c);
    if (c == '\n' && !until.empty() && absl::EndsWith(out, absl::StrCat(until, "\n"))) break;
  }
  return out;
}

// Waits (at most 5 minutes) for `go_file` to hold the Unix time in microseconds at which the
// measured window opens, and returns it (now, if it never comes).
absl::Time WaitForGo(const std::string& go_file) {
  const absl::Time give_up = absl::Now() + absl::Minutes(5);
  while (absl::Now() < give_up) {
    absl::StatusOr<std::string> go = ReadFileToString(go_file);
    int64_t us = 0;
    if (go.ok() && absl::SimpleAtoi(absl::StripAsciiWhitespace(*go), &us)) {
      return absl::FromUnixMicros(us);
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
  return absl::Now();
}

// With --window_dir: says this process is warm there and returns the window's start once told it;
// else `earliest`.
absl::Time AwaitWindow(absl::Time earliest) {
  const std::string dir = absl::GetFlag(FLAGS_window_dir);
  if (dir.empty()) return earliest;
  const std::string warm = absl::StrCat(dir, "/warm.", getpid());
  if (absl::Status s = WriteFileAtomically(warm, "warm\n", 0644); !s.ok()) {
    LOG(ERROR) << "cannot say warm in --window_dir: " << s;
  }
  return WaitForGo(absl::StrCat(dir, "/go"));
}

// Runs the clients of one measurement in worker processes of this bench, `per_process` each. Once
// every worker's clients are warm (each says WARM), the window opens for all of them at once;
// `opens` is told when.
absl::StatusOr<std::vector<ProcessTally>> RunWorkers(const std::string& address,
                                                     TensorEncoding encoding, int clients,
                                                     int per_process, const std::string& tag,
                                                     const std::function<void(absl::Time)>& opens) {
  static std::atomic<int> measurements{0};
  const std::string go_file =
      absl::StrCat("/tmp/convoy_bench_ps.", getpid(), ".go.", measurements.fetch_add(1));
  std::vector<ChildProcess> workers;
  for (int first = 0; first < clients; first += per_process) {
    std::vector<std::string> argv = g_argv;  // The user's flags; the worker's own come last.
    argv[0] = "/proc/self/exe";
    for (const std::string& flag :
         {absl::StrCat("--ps=", address), std::string("--worker"),
          absl::StrCat("--clients=", std::min(per_process, clients - first)),
          absl::StrCat("--worker_first_index=", first), absl::StrCat("--worker_tag=", tag),
          absl::StrCat("--encodings=", Name(encoding)),
          absl::StrCat("--worker_go_file=", go_file)}) {
      argv.push_back(flag);
    }
    // Plaintext to the servers this bench started, whose flags the user's do not name.
    if (absl::GetFlag(FLAGS_ps).empty()) argv.push_back("--insecure");
    ChildProcess::Options options;
    options.pipe_stdout = true;
    CONVOY_ASSIGN_OR_RETURN(ChildProcess worker, ChildProcess::Start(argv, options));
    workers.push_back(std::move(worker));
  }
  std::vector<std::string> outputs;
  for (ChildProcess& worker : workers) outputs.push_back(ReadWorker(worker, "WARM"));
  // Every worker polls for the go file every few milliseconds: half a second is plenty.
  const absl::Time measure_at = AwaitWindow(absl::Now() + absl::Milliseconds(500));
  opens(measure_at);
  absl::Status go =
      WriteFileAtomically(go_file, absl::StrCat(absl::ToUnixMicros(measure_at), "\n"), 0644);
  std::vector<ProcessTally> tallies;
  absl::Status failed = go;
  for (size_t w = 0; w < workers.size(); ++w) {
    ChildProcess& worker = workers[w];
    if (!go.ok()) worker.Signal(SIGKILL);
    const std::string out = outputs[w] + ReadWorker(worker, "");
    const std::optional<int> code = worker.Wait(absl::Minutes(10));
    ProcessTally tally;
    bool reported = false;
    for (absl::string_view line : absl::StrSplit(out, '\n', absl::SkipEmpty())) {
      if (absl::ConsumePrefix(&line, "WORKER_ERROR ")) {
        failed = absl::InternalError(absl::StrCat("a worker: ", line));
      } else if (absl::ConsumePrefix(&line, "WORKER ")) {
        std::vector<absl::string_view> f = absl::StrSplit(line, ' ');
        int64_t start_us = 0;
        reported = f.size() == 4 && absl::SimpleAtoi(f[0], &start_us) &&
                   absl::SimpleAtoi(f[1], &tally.cycles) &&
                   absl::SimpleAtoi(f[2], &tally.rejected) &&
                   absl::SimpleAtod(f[3], &tally.cpu_seconds);
        tally.window_start = absl::FromUnixMicros(start_us);
      } else if (absl::ConsumePrefix(&line, "LATENCIES")) {
        for (absl::string_view v : absl::StrSplit(line, ' ', absl::SkipEmpty())) {
          double ms = 0;
          if (absl::SimpleAtod(v, &ms)) tally.latencies_ms.push_back(ms);
        }
      }
    }
    if (failed.ok() && (!reported || code != 0)) {
      failed = absl::InternalError(
          absl::StrCat("a worker exited ", code.value_or(-1), " without its report"));
    }
    tallies.push_back(std::move(tally));
  }
  unlink(go_file.c_str());
  if (!failed.ok()) return failed;
  return tallies;
}

// Runs `clients` agents doing push+pull cycles for warm-up plus measured time, in this process or
// (more than --clients_per_process) in worker processes. `at_window` runs when the measured window
// opens (false) and when it closes (true), on a thread of its own.
absl::StatusOr<CycleResult> MeasureCycles(const std::string& address, const ModelInfo& model,
                                          TensorEncoding encoding, int clients,
                                          absl::Duration warmup, absl::Duration measured,
                                          const std::function<void(bool)>& at_window) {
  const std::string tag =
      absl::StrCat(Name(encoding), "-", clients, "-", absl::ToUnixMicros(absl::Now()));
  const int per_process = absl::GetFlag(FLAGS_clients_per_process);
  // The window opens at the same moment for every process, once all their clients are warm (with
  // --window_dir, the clients of every process that shares it).
  const bool spread = per_process > 0 && clients > per_process;
  // The window's start: once the clients have joined, in this process or in every worker.
  absl::Mutex window_mu;
  std::optional<absl::Time> window_start;
  auto opens = [&](absl::Time start) {
    absl::MutexLock lock(&window_mu);
    window_start = start;
  };
  std::thread window([&] {
    absl::Time start;
    {
      absl::MutexLock lock(
          &window_mu,
          absl::Condition(
              +[](std::optional<absl::Time>* t) { return t->has_value(); }, &window_start));
      start = **&window_start;
    }
    absl::SleepFor(start - absl::Now());
    at_window(false);
    absl::SleepFor(start + measured - absl::Now());
    at_window(true);
  });
  absl::StatusOr<std::vector<ProcessTally>> tallies =
      spread ? RunWorkers(address, encoding, clients, per_process, tag, opens)
             : [&]() -> absl::StatusOr<std::vector<ProcessTally>> {
    CONVOY_ASSIGN_OR_RETURN(ProcessTally tally,
                            RunClients(address, model, encoding, clients, 0, tag, warmup, measured,
                                       warmup / 2, [&](absl::Time earliest) {
                                         const absl::Time start = AwaitWindow(earliest);
                                         opens(start);
                                         return start;
                                       }));
    return std::vector<ProcessTally>{std::move(tally)};
  }();
  if (!tallies.ok()) opens(absl::Now() - measured);  // Nothing to wait for.
  window.join();
  if (!tallies.ok()) return tallies.status();
  absl::Time measure_at;
  {
    absl::MutexLock lock(&window_mu);
    measure_at = *window_start;
  }
  CycleResult result;
  std::vector<double> latencies;
  uint64_t cycles = 0;
  double client_cpu = 0;
  for (const ProcessTally& tally : *tallies) {
    client_cpu += tally.cpu_seconds;
    if (tally.window_start > measure_at + absl::Milliseconds(1)) {
      return absl::DeadlineExceededError(absl::StrCat(
          "a client process joined its clients only at ", absl::FormatTime(tally.window_start),
          ", after the window opened: fewer --clients_per_process, or a longer --warmup_seconds"));
    }
    cycles += tally.cycles;
    result.rejected += tally.rejected;
    latencies.insert(latencies.end(), tally.latencies_ms.begin(), tally.latencies_ms.end());
  }
  std::sort(latencies.begin(), latencies.end());
  result.cycles_per_s = static_cast<double>(cycles) / absl::ToDoubleSeconds(measured);
  result.client_cpu_ms_per_cycle = cycles > 0 ? 1e3 * client_cpu / static_cast<double>(cycles) : 0;
  result.p50_ms = Percentile(latencies, 0.50);
  result.p99_ms = Percentile(latencies, 0.99);
  return result;
}

// A worker process: its clients' report on stdout.
int RunWorker() {
  absl::StatusOr<ModelInfo> model = DescribeModel(absl::GetFlag(FLAGS_model));
  absl::StatusOr<TensorEncoding> encoding =
      ParseTensorEncoding("encodings", absl::GetFlag(FLAGS_encodings).front());
  int clients = 0;
  absl::Status status = !model.ok() ? model.status() : encoding.status();
  if (status.ok() && !absl::SimpleAtoi(absl::GetFlag(FLAGS_clients).front(), &clients)) {
    status = absl::InvalidArgumentError("--clients");
  }
  absl::StatusOr<ProcessTally> tally = ProcessTally();
  if (!status.ok()) {
    tally = status;
  } else {
    // Warm: says so, then waits (bounded) for the time the window opens.
    auto wait_for_go = [](absl::Time) {
      std::printf("WARM\n");
      std::fflush(stdout);
      return WaitForGo(absl::GetFlag(FLAGS_worker_go_file));
    };
    tally = RunClients(absl::GetFlag(FLAGS_ps), *model, *encoding, clients,
                       absl::GetFlag(FLAGS_worker_first_index), absl::GetFlag(FLAGS_worker_tag),
                       absl::Seconds(absl::GetFlag(FLAGS_warmup_seconds)),
                       absl::Seconds(absl::GetFlag(FLAGS_seconds)),
                       absl::Seconds(absl::GetFlag(FLAGS_warmup_seconds)) / 2, wait_for_go);
  }
  if (!tally.ok()) {
    std::printf("WORKER_ERROR %s\n", tally.status().ToString().c_str());
    return 1;
  }
  std::printf("WORKER %lld %llu %llu %.6f\nLATENCIES",
              static_cast<long long>(absl::ToUnixMicros(tally->window_start)),
              static_cast<unsigned long long>(tally->cycles),
              static_cast<unsigned long long>(tally->rejected), tally->cpu_seconds);
  for (double ms : tally->latencies_ms) std::printf(" %.3f", ms);
  std::printf("\n");
  return 0;
}

// The driver.

absl::StatusOr<std::vector<int>> ParseClientCounts(const std::vector<std::string>& values) {
  std::vector<int> counts;
  for (const std::string& value : values) {
    int n = 0;
    if (!absl::SimpleAtoi(value, &n) || n < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("--clients: '", value, "' is not a count >= 1"));
    }
    counts.push_back(n);
  }
  if (counts.empty()) return absl::InvalidArgumentError("--clients is empty");
  return counts;
}

absl::StatusOr<std::vector<TensorEncoding>> ParseEncodings(const std::vector<std::string>& values) {
  std::vector<TensorEncoding> encodings;
  for (const std::string& value : values) {
    CONVOY_ASSIGN_OR_RETURN(const TensorEncoding encoding, ParseTensorEncoding("encodings", value));
    encodings.push_back(encoding);
  }
  if (encodings.empty()) return absl::InvalidArgumentError("--encodings is empty");
  return encodings;
}

// The machine's limit, measured again before every measurement of cycles.
struct Limit {
  double tcp_bytes_per_s = 0;  // The fastest of --tcp_repeats transfers.
  ApplyRates apply;
};

absl::StatusOr<Limit> MeasureLimit(size_t parameters) {
  Limit limit;
  for (int i = 0; i < absl::GetFlag(FLAGS_tcp_repeats); ++i) {
    CONVOY_ASSIGN_OR_RETURN(const double rate, MeasureLoopbackTcp(absl::GetFlag(FLAGS_tcp_bytes)));
    limit.tcp_bytes_per_s = std::max(limit.tcp_bytes_per_s, rate);
  }
  CONVOY_ASSIGN_OR_RETURN(limit.apply,
                          MeasureApply(parameters, absl::GetFlag(FLAGS_optimizer),
                                       absl::Seconds(absl::GetFlag(FLAGS_apply_seconds))));
  return limit;
}

// A server to measure: a convoy_ps this bench started, or an external one (--ps).
struct Server {
  std::string label;    // Empty for --ps.
  std::string address;  // host:port[,host:port...]
  std::optional<ChildProcess> process;
  std::string log_path;
};

// --servers, parsed: LABEL=[BINARY] [FLAGS], ';'-separated.
struct ServerSpec {
  std::string label;
  std::vector<std::string> argv;  // The binary and its flags, without the bench's own.
};

absl::StatusOr<std::vector<ServerSpec>> ParseServers(const std::string& text,
                                                     const std::string& default_binary) {
  std::vector<ServerSpec> specs;
  for (absl::string_view entry : absl::StrSplit(text, ';', absl::SkipWhitespace())) {
    const std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(entry, absl::MaxSplits('=', 1));
    const std::string label(absl::StripAsciiWhitespace(kv.first));
    if (label.empty() ||
        label.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--servers: '", entry, "' is not LABEL=[BINARY] [FLAGS] with a label of [a-z0-9_]"));
    }
    ServerSpec spec{label, {}};
    for (absl::string_view word : absl::StrSplit(kv.second, ' ', absl::SkipWhitespace())) {
      spec.argv.emplace_back(word);
    }
    if (spec.argv.empty() || absl::StartsWith(spec.argv.front(), "--")) {
      spec.argv.insert(spec.argv.begin(), default_binary);
    }
    for (const ServerSpec& other : specs) {
      if (other.label == label) {
        return absl::InvalidArgumentError(absl::StrCat("--servers: label '", label, "' twice"));
      }
    }
    specs.push_back(std::move(spec));
  }
  if (specs.empty()) return absl::InvalidArgumentError("--servers is empty");
  return specs;
}

// The convoy_ps beside this bench.
std::string SiblingConvoyPs() {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return "convoy_ps";
  std::string path(self, static_cast<size_t>(n));
  return path.substr(0, path.rfind('/') + 1) + "convoy_ps";
}

absl::StatusOr<Server> StartServer(const ServerSpec& spec, const std::string& dir) {
  Server server;
  server.label = spec.label;
  server.log_path = absl::StrCat(dir, "/", spec.label, ".log");
  const std::string port_file = absl::StrCat(dir, "/", spec.label, ".port");
  std::vector<std::string> argv = spec.argv;
  argv.insert(
      argv.begin() + 1,
      {"--insecure", "--bind=127.0.0.1", "--port=0", absl::StrCat("--port_file=", port_file),
       absl::StrCat("--model=", absl::GetFlag(FLAGS_model)),
       absl::StrCat("--optimizer=", ps::OptimizerName(absl::GetFlag(FLAGS_optimizer)))});
  ChildProcess::Options options;
  options.log_path = server.log_path;
  CONVOY_ASSIGN_OR_RETURN(ChildProcess process, ChildProcess::Start(argv, options));
  server.process = std::move(process);
  const absl::Time give_up = absl::Now() + absl::Seconds(60);
  while (true) {
    absl::StatusOr<std::string> port = ReadFileToString(port_file);
    if (port.ok() && !port->empty()) {
      server.address = absl::StrCat("127.0.0.1:", absl::StripAsciiWhitespace(*port));
      return server;
    }
    if (!server.process->running() || absl::Now() > give_up) {
      return absl::UnavailableError(absl::StrCat("server '", spec.label, "' (",
                                                 absl::StrJoin(argv, " "), ") did not start; see ",
                                                 server.log_path));
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
}

// What a server process used: its resident memory (largest sample) and CPU time.
struct ProcessUse {
  double cpu_seconds = 0;  // user + system
  double rss_bytes = 0;
};

double CpuSeconds(pid_t pid) {
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  // Fields after the command's closing parenthesis: state is field 3, utime 14, stime 15.
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return 0;
  const std::vector<std::string> fields =
      absl::StrSplit(text.substr(close + 2), ' ', absl::SkipEmpty());
  double utime = 0, stime = 0;
  if (fields.size() < 13 || !absl::SimpleAtod(fields[11], &utime) ||
      !absl::SimpleAtod(fields[12], &stime)) {
    return 0;
  }
  return (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

double RssBytes(pid_t pid) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    absl::string_view rest = line;
    double kb = 0;
    if (absl::ConsumePrefix(&rest, "VmRSS:") &&
        absl::SimpleAtod(absl::StripSuffix(absl::StripAsciiWhitespace(rest), " kB"), &kb)) {
      return kb * 1024;
    }
  }
  return 0;
}

// What the server said of itself over the measured window (GetStatus at both ends).
struct ServerWindow {
  bool known = false;  // The server reported its batches (a server that predates them does not).
  double mean_batch = 0;
  uint32_t max_batch = 0;
  uint64_t busy = 0;  // Pushes refused as busy.
  uint32_t push_buffers = 0;
  uint64_t push_buffer_bytes = 0;
};

ServerWindow WindowOf(const v1::StatusResponse& before, const v1::StatusResponse& after) {
  ServerWindow window;
  uint64_t batches = 0, pushes = 0;
  for (const auto& [size, count] : after.drained_batches()) {
    const auto it = before.drained_batches().find(size);
    const uint64_t n = count - (it == before.drained_batches().end() ? 0 : it->second);
    if (n == 0) continue;
    batches += n;
    pushes += n * size;
    window.max_batch = std::max(window.max_batch, size);
  }
  window.known = after.max_pushes_per_step() > 0;
  window.mean_batch = batches > 0 ? static_cast<double>(pushes) / batches : 0;
  auto busy = [](const v1::StatusResponse& s) -> uint64_t {
    const auto it = s.rejections().find("REJECT_REASON_SERVER_BUSY");
    return it == s.rejections().end() ? 0 : it->second;
  };
  window.busy = busy(after) - busy(before);
  window.push_buffers = after.push_buffers();
  window.push_buffer_bytes = after.push_buffer_bytes();
  return window;
}

// One measurement of one configuration, with the limit measured just before it (none against an
// external server, whose machine this is not).
struct Sample {
  CycleResult cycles;
  std::optional<Limit> limit;
  std::optional<ProcessUse> use;  // Of a server this bench started.
  ServerWindow window;
};

struct Configuration {
  size_t server;
  TensorEncoding push;
  int clients;
  std::vector<Sample> samples;
  // Repeats that could not be measured (a server that refused or lost clients, or died), with why:
  // reported in the tables and as RESULT ..._failed_N, never ending the run.
  std::vector<std::string> failures;
};

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  if (n == 0) return 0;
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

// A figure over the repeats: its median, least and greatest.
struct Spread {
  double median = 0;
  double min = 0;
  double max = 0;
};

template <typename F>
Spread SpreadOf(const std::vector<Sample>& samples, F value) {
  std::vector<double> values;
  for (const Sample& sample : samples) values.push_back(value(sample));
  Spread spread;
  spread.median = Median(values);
  spread.min = *std::min_element(values.begin(), values.end());
  spread.max = *std::max_element(values.begin(), values.end());
  return spread;
}

// Measures one configuration against `server`: the cycles, and around their window the server's
// status, CPU time and (by a sampler) its largest resident memory.
absl::StatusOr<Sample> MeasureOne(const Server& server, const ModelInfo& model,
                                  const Configuration& configuration,
                                  agent::PsClient* status_client) {
  Sample sample;
  const pid_t pid = server.process.has_value() ? server.process->pid() : -1;
  v1::StatusResponse before, after;
  double cpu_before = 0, cpu_after = 0;
  std::atomic<bool> sampling{true};
  std::atomic<double> rss{0};
  std::thread sampler([&] {
    while (pid > 0 && sampling.load()) {
      rss.store(std::max(rss.load(), RssBytes(pid)));
      absl::SleepFor(absl::Milliseconds(50));
    }
  });
  auto at_window = [&](bool end) {
    absl::StatusOr<v1::StatusResponse> status = status_client->Status();
    (end ? after : before) = status.ok() ? *status : v1::StatusResponse();
    if (pid > 0) (end ? cpu_after : cpu_before) = CpuSeconds(pid);
  };
  absl::StatusOr<CycleResult> r =
      MeasureCycles(server.address, model, configuration.push, configuration.clients,
                    absl::Seconds(absl::GetFlag(FLAGS_warmup_seconds)),
                    absl::Seconds(absl::GetFlag(FLAGS_seconds)), at_window);
  sampling = false;
  sampler.join();
  if (!r.ok()) return r.status();
  sample.cycles = *r;
  sample.window = WindowOf(before, after);
  if (pid > 0) sample.use = ProcessUse{cpu_after - cpu_before, rss.load()};
  return sample;
}

int Run() {
  if (!FlagsInRange(
          "convoy_bench_ps",
          {RealRange("seconds", absl::GetFlag(FLAGS_seconds), 0, kNoRealMax, Ends::kOpenMin),
           RealRange("warmup_seconds", absl::GetFlag(FLAGS_warmup_seconds), 0, kNoRealMax),
           IntRange("tcp_bytes", absl::GetFlag(FLAGS_tcp_bytes), 1, int64_t{1} << 40),
           IntRange("tcp_repeats", absl::GetFlag(FLAGS_tcp_repeats), 1, 1000),
           IntRange("repeats", absl::GetFlag(FLAGS_repeats), 1, 1000),
           RealRange("apply_seconds", absl::GetFlag(FLAGS_apply_seconds), 0, kNoRealMax,
                     Ends::kOpenMin)})) {
    return kExitUsage;
  }
  // Security first: a misconfigured --ps fails before any measurement.
  const bool local = absl::GetFlag(FLAGS_ps).empty();
  if (local) {
    g_security.insecure = true;
  } else {
    absl::StatusOr<ClientSecurity> security =
        agent::ClientSecurityFrom(ClientSecuritySettingsFromFlags());
    if (!security.ok()) {
      LOG(ERROR) << security.status();
      return 2;
    }
    g_security = *std::move(security);
  }
  if (absl::GetFlag(FLAGS_worker)) return RunWorker();
  absl::StatusOr<std::vector<int>> client_counts = ParseClientCounts(absl::GetFlag(FLAGS_clients));
  absl::StatusOr<std::vector<TensorEncoding>> encodings =
      ParseEncodings(absl::GetFlag(FLAGS_encodings));
  if (!client_counts.ok() || !encodings.ok()) {
    LOG(ERROR) << (client_counts.ok() ? encodings.status() : client_counts.status());
    return 2;
  }
  if (absl::Status s = ParseChannelArgs(absl::GetFlag(FLAGS_client_channel_args)); !s.ok()) {
    LOG(ERROR) << s;
    return 2;
  }
  absl::StatusOr<std::vector<ServerSpec>> specs =
      local ? ParseServers(absl::GetFlag(FLAGS_servers), SiblingConvoyPs())
            : std::vector<ServerSpec>();
  if (!specs.ok()) {
    LOG(ERROR) << specs.status();
    return 2;
  }
  absl::StatusOr<ModelInfo> model = DescribeModel(absl::GetFlag(FLAGS_model));
  if (!model.ok()) {
    LOG(ERROR) << model.status();
    return 2;
  }
  const double seconds = absl::GetFlag(FLAGS_seconds);
  const double warmup_seconds = absl::GetFlag(FLAGS_warmup_seconds);
  const int repeats = absl::GetFlag(FLAGS_repeats);
  const size_t parameters = model->parameter_count;
  const double fp32_bytes =
      static_cast<double>(parameters) * BytesPerElement(TensorEncoding::kFp32);
  auto bytes_per_cycle = [&](TensorEncoding push) {
    return static_cast<double>(parameters) * BytesPerElement(push) + fp32_bytes;
  };
  auto limit_for = [&](const Limit& limit, TensorEncoding push) {
    return std::min(limit.tcp_bytes_per_s / bytes_per_cycle(push), limit.apply.apply_per_s);
  };

  std::printf("convoy_bench_ps: model %s, %zu parameters (%.2f MB fp32), %u hardware threads\n",
              model->spec.name.c_str(), parameters, fp32_bytes / 1e6,
              std::thread::hardware_concurrency());
  for (TensorEncoding push : *encodings) {
    std::printf("  %s push: %.2f MB per cycle (push + fp32 pull)\n", Name(push),
                bytes_per_cycle(push) / 1e6);
  }

  std::vector<Server> servers;
  if (local) {
    const std::string dir = absl::StrCat("/tmp/convoy_bench_ps.", getpid());
    if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
      LOG(ERROR) << "cannot make " << dir << ": " << std::strerror(errno);
      return 1;
    }
    for (const ServerSpec& spec : *specs) {
      absl::StatusOr<Server> server = StartServer(spec, dir);
      if (!server.ok()) {
        LOG(ERROR) << server.status();
        return 1;
      }
      std::printf("  server %s: %s on %s (log %s)\n", spec.label.c_str(),
                  absl::StrJoin(spec.argv, " ").c_str(), server->address.c_str(),
                  server->log_path.c_str());
      servers.push_back(*std::move(server));
    }
  } else {
    servers.push_back(Server{"", absl::GetFlag(FLAGS_ps), std::nullopt, ""});
  }
  std::fflush(stdout);
  // One status client per server (shard 0 of a sharded one).
  std::vector<std::unique_ptr<agent::PsClient>> status_clients;
  for (const Server& server : servers) {
    agent::PsClientOptions options;
    options.address = server.address.substr(0, server.address.find(','));
    options.agent_id = "bench-status";
    options.security = g_security;
    options.retry_for = absl::Seconds(5);
    status_clients.push_back(
        std::make_unique<agent::PsClient>(options, DistinctChannel(options.address)));
  }

  std::printf(
      "\nPush+pull cycles, %.1f s measured after %.1f s warm-up each, %d repeats interleaved%s\n",
      seconds, warmup_seconds, repeats,
      local ? "; before each, the limit: loopback TCP, apply, apply + publish" : "");
  std::printf("%-3s %-10s %-5s %7s %10s %8s %8s %7s %8s %8s %9s %8s %8s %8s %6s %5s %8s %8s\n",
              "rep", "server", "push", "clients", "cycles/s", "p50 ms", "p99 ms", "MB/s",
              "TCP GB/s", "apply/s", "+publish", "limit", "fraction", "srv MB", "batch", "max",
              "srv ms/c", "cli ms/c");
  std::fflush(stdout);

  std::vector<Configuration> configurations;
  for (size_t server = 0; server < servers.size(); ++server) {
    for (TensorEncoding push : *encodings) {
      for (int clients : *client_counts) configurations.push_back({server, push, clients, {}, {}});
    }
  }
  for (int repeat = 1; repeat <= repeats; ++repeat) {
    for (Configuration& configuration : configurations) {
      const Server& server = servers[configuration.server];
      std::optional<Limit> limit;
      if (local) {
        absl::StatusOr<Limit> measured = MeasureLimit(parameters);
        if (!measured.ok()) {
          LOG(ERROR) << "measuring the limit failed: " << measured.status();
          return 1;
        }
        limit = *measured;
      }
      absl::StatusOr<Sample> measured =
          MeasureOne(server, *model, configuration, status_clients[configuration.server].get());
      if (!measured.ok()) {
        LOG(ERROR) << Name(configuration.push) << " with " << configuration.clients
                   << " clients against " << (local ? server.label : server.address)
                   << " failed: " << measured.status();
        std::printf("%-3d %-10s %-5s %7d  failed: %s\n", repeat, local ? server.label.c_str() : "-",
                    Name(configuration.push), configuration.clients,
                    std::string(measured.status().message()).c_str());
        std::fflush(stdout);
        configuration.failures.push_back(std::string(measured.status().message()));
        continue;
      }
      Sample sample = *std::move(measured);
      sample.limit = limit;
      const CycleResult& r = sample.cycles;
      std::printf("%-3d %-10s %-5s %7d %10.1f %8.2f %8.2f %7.0f", repeat,
                  local ? server.label.c_str() : "-", Name(configuration.push),
                  configuration.clients, r.cycles_per_s, r.p50_ms, r.p99_ms,
                  r.cycles_per_s * bytes_per_cycle(configuration.push) / 1e6);
      if (sample.limit) {
        const double l = limit_for(*sample.limit, configuration.push);
        std::printf(" %8.2f %8.1f %9.1f %8.1f %8.3f", sample.limit->tcp_bytes_per_s / 1e9,
                    sample.limit->apply.apply_per_s, sample.limit->apply.apply_publish_per_s, l,
                    r.cycles_per_s / l);
      } else {
        std::printf(" %8s %8s %9s %8s %8s", "-", "-", "-", "-", "-");
      }
      if (sample.use) {
        std::printf(" %8.0f", sample.use->rss_bytes / 1e6);
      } else {
        std::printf(" %8s", "-");
      }
      if (sample.window.known) {
        std::printf(" %6.2f %5u", sample.window.mean_batch, sample.window.max_batch);
      } else {
        std::printf(" %6s %5s", "-", "-");
      }
      const double window_cycles = r.cycles_per_s * seconds;
      if (sample.use && window_cycles > 0) {
        std::printf(" %8.2f", 1e3 * sample.use->cpu_seconds / window_cycles);
      } else {
        std::printf(" %8s", "-");
      }
      std::printf(" %8.2f\n", r.client_cpu_ms_per_cycle);
      std::fflush(stdout);
      configuration.samples.push_back(sample);
    }
  }

  std::printf(
      "\nMedians over %d repeats (spread: least-greatest). fraction: of the limit measured just "
      "before each repeat;\nof ceil.: of the server's serial ceiling (apply + publish) then; srv "
      "MB: the server's largest resident memory;\nbatch: pushes per drained batch (mean, max); srv "
      "ms/c, cli ms/c: the server's and the clients' processes' CPU\ntime per cycle; busy: pushes "
      "refused as busy.\n",
      repeats);
  std::printf("%-10s %-5s %7s %10s %15s %8s %8s %8s %8s %15s %9s %9s %8s %6s %5s %8s %8s %6s %9s\n",
              "server", "push", "clients", "cycles/s", "spread", "p50 ms", "p99 ms", "limit",
              "fraction", "spread", "ceiling", "of ceil.", "srv MB", "batch", "max", "srv ms/c",
              "cli ms/c", "busy", "rejected");
  std::vector<std::string> results;
  auto result = [&](const std::string& key, double value) {
    results.push_back(absl::StrFormat("RESULT %s=%.6g", key, value));
  };
  for (const Configuration& configuration : configurations) {
    const std::vector<Sample>& samples = configuration.samples;
    const TensorEncoding push = configuration.push;
    const Server& server = servers[configuration.server];
    // RESULT keys: [server_][bf16_]name_clients; fp32 and a lone server carry no prefix.
    const std::string prefix = absl::StrCat(servers.size() > 1 ? server.label + "_" : "",
                                            push == TensorEncoding::kBf16 ? "bf16_" : "");
    const std::string n = absl::StrCat(configuration.clients);
    if (!configuration.failures.empty()) {
      result(absl::StrCat(prefix, "failed_", n), configuration.failures.size());
    }
    if (samples.empty()) {
      std::printf("%-10s %-5s %7d  failed in all %zu repeats: %s\n",
                  local ? server.label.c_str() : "-", Name(push), configuration.clients,
                  configuration.failures.size(), configuration.failures.front().c_str());
      continue;
    }
    const Spread cycles = SpreadOf(samples, [](const Sample& s) { return s.cycles.cycles_per_s; });
    const double p50 = SpreadOf(samples, [](const Sample& s) { return s.cycles.p50_ms; }).median;
    const double p99 = SpreadOf(samples, [](const Sample& s) { return s.cycles.p99_ms; }).median;
    uint64_t rejected = 0, busy = 0;
    for (const Sample& s : samples) {
      rejected += s.cycles.rejected;
      busy += s.window.busy;
    }
    result(absl::StrCat(prefix, "cycles_per_s_", n), cycles.median);
    result(absl::StrCat(prefix, "cycles_per_s_min_", n), cycles.min);
    result(absl::StrCat(prefix, "cycles_per_s_max_", n), cycles.max);
    result(absl::StrCat(prefix, "p50_ms_", n), p50);
    result(absl::StrCat(prefix, "p99_ms_", n), p99);
    const double client_cpu =
        SpreadOf(samples, [](const Sample& s) { return s.cycles.client_cpu_ms_per_cycle; }).median;
    result(absl::StrCat(prefix, "client_cpu_ms_per_cycle_", n), client_cpu);
    std::printf("%-10s %-5s %7d %10.1f %7.1f-%-7.1f %8.2f %8.2f",
                local ? server.label.c_str() : "-", Name(push), configuration.clients,
                cycles.median, cycles.min, cycles.max, p50, p99);
    if (local) {
      const Spread limit =
          SpreadOf(samples, [&](const Sample& s) { return limit_for(*s.limit, push); });
      const Spread fraction = SpreadOf(samples, [&](const Sample& s) {
        return s.cycles.cycles_per_s / limit_for(*s.limit, push);
      });
      const Spread ceiling =
          SpreadOf(samples, [](const Sample& s) { return s.limit->apply.apply_publish_per_s; });
      const Spread of_ceiling = SpreadOf(samples, [](const Sample& s) {
        return s.cycles.cycles_per_s / s.limit->apply.apply_publish_per_s;
      });
      const double rss = SpreadOf(samples, [](const Sample& s) { return s.use->rss_bytes; }).median;
      const double cpu_per_cycle = SpreadOf(samples, [&](const Sample& s) {
                                     const double c = s.cycles.cycles_per_s * seconds;
                                     return c > 0 ? 1e3 * s.use->cpu_seconds / c : 0;
                                   }).median;
      std::printf(" %8.1f %8.3f %7.3f-%-7.3f %9.1f %9.3f %8.0f", limit.median, fraction.median,
                  fraction.min, fraction.max, ceiling.median, of_ceiling.median, rss / 1e6);
      if (samples.front().window.known) {
        const double batch =
            SpreadOf(samples, [](const Sample& s) { return s.window.mean_batch; }).median;
        uint32_t max_batch = 0;
        for (const Sample& s : samples) max_batch = std::max(max_batch, s.window.max_batch);
        std::printf(" %6.2f %5u", batch, max_batch);
        result(absl::StrCat(prefix, "mean_batch_", n), batch);
        result(absl::StrCat(prefix, "max_batch_", n), max_batch);
      } else {
        std::printf(" %6s %5s", "-", "-");
      }
      std::printf(" %8.2f %8.2f", cpu_per_cycle, client_cpu);
      result(absl::StrCat(prefix, "limit_cycles_per_s_", n), limit.median);
      result(absl::StrCat(prefix, "fraction_of_limit_", n), fraction.median);
      result(absl::StrCat(prefix, "fraction_of_limit_min_", n), fraction.min);
      result(absl::StrCat(prefix, "fraction_of_limit_max_", n), fraction.max);
      result(absl::StrCat(prefix, "serial_ceiling_per_s_", n), ceiling.median);
      result(absl::StrCat(prefix, "fraction_of_serial_ceiling_", n), of_ceiling.median);
      result(absl::StrCat(prefix, "server_rss_mb_", n), rss / 1e6);
      result(absl::StrCat(prefix, "server_cpu_ms_per_cycle_", n), cpu_per_cycle);
    } else {
      std::printf(" %8s %8s %15s %9s %9s %8s %6s %5s %8s %8.2f", "-", "-", "-", "-", "-", "-", "-",
                  "-", "-", client_cpu);
    }
    std::printf(" %6llu %9llu", static_cast<unsigned long long>(busy),
                static_cast<unsigned long long>(rejected));
    if (!configuration.failures.empty()) {
      std::printf("  (%zu repeats failed: %s)", configuration.failures.size(),
                  configuration.failures.front().c_str());
    }
    std::printf("\n");
  }
  for (size_t i = 0; i < servers.size(); ++i) {
    absl::StatusOr<v1::StatusResponse> status = status_clients[i]->Status();
    if (!status.ok()) continue;
    std::printf(
        "\nServer %s: version %llu, %llu pushes applied in %llu steps, %u push buffers "
        "(%.0f MB)",
        local ? servers[i].label.c_str() : servers[i].address.c_str(),
        static_cast<unsigned long long>(status->version()),
        static_cast<unsigned long long>(status->updates_applied()),
        static_cast<unsigned long long>(status->apply_steps()), status->push_buffers(),
        static_cast<double>(status->push_buffer_bytes()) / 1e6);
    if (servers[i].process.has_value()) {
      servers[i].process->Signal(SIGTERM);
      servers[i].process->Wait(absl::Seconds(30));
    }
  }
  std::printf("\n");

  result("parameters", static_cast<double>(parameters));
  // The machine over the whole run: medians of every repeat's limit measurement.
  std::vector<Sample> all;
  for (const Configuration& c : configurations) {
    all.insert(all.end(), c.samples.begin(), c.samples.end());
  }
  if (local && !all.empty()) {
    result("tcp_bytes_per_s",
           SpreadOf(all, [](const Sample& s) { return s.limit->tcp_bytes_per_s; }).median);
    result("apply_per_s",
           SpreadOf(all, [](const Sample& s) { return s.limit->apply.apply_per_s; }).median);
    result("apply_publish_per_s", SpreadOf(all, [](const Sample& s) {
                                    return s.limit->apply.apply_publish_per_s;
                                  }).median);
  }
  for (TensorEncoding push : *encodings) {
    result(absl::StrCat(push == TensorEncoding::kBf16 ? "bf16_" : "", "bytes_per_cycle"),
           bytes_per_cycle(push));
  }
  std::printf("\n");
  for (const std::string& line : results) std::printf("%s\n", line.c_str());
  return 0;
}

}  // namespace
}  // namespace convoy::bench

int main(int argc, char** argv) {
  convoy::bench::g_argv.assign(argv, argv + argc);
  convoy::InitProcess(
      argc, argv,
      "Push+pull cycles/s of parameter servers with 1..N concurrent clients over loopback,\n"
      "each measurement repeated (--repeats, interleaved) after its own measurement of the\n"
      "machine's limit (loopback TCP bytes/s, the optimizer's apply rate, apply + publish),\n"
      "with each server's resident memory, CPU time and drained batch sizes.\n"
      "Reports medians and spreads; ends with RESULT key=value lines.\n"
      "Usage: convoy_bench_ps [--clients=1,4,16,64] [--encodings=fp32,bf16] [--seconds=5]\n"
      "                       [--repeats=3] [--servers='LABEL=[BINARY] FLAGS;...'] \n"
      "                       [--ps=host:port,...]",
      // Its clients copy model-sized messages as convoy_ps does; its figures were measured so.
      convoy::ProcessPolicy{/*huge_pages_in_heap=*/true});
  return convoy::bench::Run();
}
