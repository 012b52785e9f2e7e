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
// Prints a table, then `RESULT key=value` lines. Not a test: it never fails on a slow machine.
#include <arpa/inet.h>
#include <glog/logging.h>
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "agent/client_security_flags.h"
#include "agent/ps_client.h"
#include "common/flag_ranges.h"
#include "common/init.h"
#include "common/model_registry.h"
#include "common/shard_map.h"
#include "common/status_macros.h"
#include "common/tensor_encoding.h"
#include "param_server/grpc_server.h"
#include "param_server/optimizer.h"
#include "param_server/parameter_server.h"
#include "param_server/weight_store.h"

ABSL_FLAG(std::string, model, "cookbook",
          "Model whose size the cycles move (cookbook: 903,941 parameters).");
ABSL_FLAG(std::string, ps, "",
          "An external parameter server host:port to measure, or every shard's host:port,... of a "
          "sharded one in shard order. Empty: an in-process server on 127.0.0.1:0.");
ABSL_FLAG(std::vector<std::string>, clients, std::vector<std::string>({"1", "4", "16", "64"}),
          "Concurrent client counts to measure, comma-separated.");
ABSL_FLAG(std::vector<std::string>, encodings, std::vector<std::string>({"fp32", "bf16"}),
          "Push encodings to measure, comma-separated (fp32, bf16). Pulls are always fp32.");
ABSL_FLAG(double, seconds, 5, "Measured seconds per configuration.");
ABSL_FLAG(double, warmup_seconds, 1, "Unmeasured seconds before each configuration's measurement.");
ABSL_FLAG(double, measure_at_unix_seconds, 0,
          "Start the measured window at this Unix time (if later than the warm-up's end), so that "
          "clients in several processes measure the same seconds; 0: after the warm-up.");
ABSL_FLAG(convoy::Optimizer, optimizer, convoy::Optimizer::kAdam,
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
ABSL_FLAG(bool, server_info_logs, false,
          "Show the in-process server's INFO lines (one per joining client). Off: warnings and "
          "errors only, so that the table is not buried.");

namespace convoy {
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

absl::StatusOr<ApplyRates> MeasureApply(size_t parameters, Optimizer optimizer_kind,
                                        absl::Duration duration) {
  WeightStore store(std::vector<float>(parameters, 0.01f), 0);
  OptimizerOptions options;
  options.kind = optimizer_kind;
  CONVOY_ASSIGN_OR_RETURN(std::unique_ptr<FlatOptimizer> optimizer,
                          FlatOptimizer::Create(options, store.mutable_master(), store.size()));
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

// Nearest-rank percentile of sorted values.
double Percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const size_t rank = static_cast<size_t>(std::ceil(p * static_cast<double>(sorted.size())));
  return sorted[std::min(sorted.size() - 1, rank == 0 ? 0 : rank - 1)];
}

// Runs `clients` agents doing push+pull cycles for warm-up plus measured time.
absl::StatusOr<CycleResult> MeasureCycles(const std::string& address, const ModelInfo& model,
                                          TensorEncoding encoding, int clients,
                                          absl::Duration warmup, absl::Duration measured) {
  std::vector<ClientTally> tallies(clients);
  absl::BlockingCounter joined(clients);
  absl::Notification go;
  absl::Time measure_start;  // Written before `go` is notified.
  absl::Time measure_end;
  const std::string tag = absl::StrCat(encoding == TensorEncoding::kBf16 ? "bf16" : "fp32", "-",
                                       clients, "-", absl::ToUnixMicros(absl::Now()));

  // A sharded server (several addresses, in shard order): each client has one PsClient per shard
  // and a cycle pushes and pulls every shard's range, all shards at once, as an agent's session
  // does.
  const std::vector<std::string> shards = absl::StrSplit(address, ',');
  CONVOY_ASSIGN_OR_RETURN(ShardMap map, MakeShardMap(model, static_cast<uint32_t>(shards.size())));

  auto run_client = [&](int index) {
    ClientTally& tally = tallies[index];
    struct Shard {
      std::unique_ptr<PsClient> client;
      std::vector<float> weights;
      uint64_t version = 0;
      uint64_t incarnation = 0;
    };
    std::vector<Shard> mine(shards.size());
    std::vector<float> gradient(model.parameter_count);
    FillGradient(static_cast<uint64_t>(index) + 1, &gradient);
    absl::Status status;
    for (size_t s = 0; s < shards.size() && status.ok(); ++s) {
      PsClientOptions options;
      options.address = shards[s];
      options.agent_id = absl::StrCat("bench-", tag, "-", index);
      options.hostname = "convoy_bench_ps";
      options.agent_index = static_cast<uint32_t>(index);
      options.model_fingerprint = model.fingerprint;
      options.push_encoding = encoding;
      options.security = g_security;
      if (shards.size() > 1) {
        options.num_shards = static_cast<uint32_t>(shards.size());
        options.shard_index = static_cast<uint32_t>(s);
        options.shard_map_digest = map.digest;
      }
      mine[s].client = std::make_unique<PsClient>(options, DistinctChannel(shards[s]));
      status = mine[s].client->Join().status();
      if (!status.ok()) break;
      absl::StatusOr<PullResult> first =
          mine[s].client->Pull(0, 0, v1::NETWORK_ONLINE, &mine[s].weights);
      if (first.ok()) {
        mine[s].version = first->version;
        mine[s].incarnation = first->incarnation;
      } else {
        status = first.status();
      }
    }
    joined.DecrementCount();
    go.WaitForNotification();
    if (!status.ok()) {
      tally.error = status;
      return;
    }
    // One shard's half of a cycle: push its range, pull it if newer. Accepted or not.
    auto cycle_on = [&](size_t s) -> absl::StatusOr<bool> {
      Shard& shard = mine[s];
      const ShardRange& range = map.ranges[s];
      CONVOY_ASSIGN_OR_RETURN(PushResult pushed,
                              shard.client->Push(gradient.data() + range.begin, range.size(),
                                                 shard.version, /*minibatch_count=*/1));
      CONVOY_ASSIGN_OR_RETURN(
          PullResult pulled,
          shard.client->Pull(shard.version, shard.incarnation, v1::NETWORK_ONLINE, &shard.weights));
      shard.version = pulled.version;
      shard.incarnation = pulled.incarnation;
      return pushed.accepted;
    };
    tally.latencies_ms.reserve(4096);
    while (true) {
      const absl::Time begin = absl::Now();
      std::vector<std::future<absl::StatusOr<bool>>> others;
      for (size_t s = 1; s < shards.size(); ++s) {
        others.push_back(std::async(std::launch::async, cycle_on, s));
      }
      std::vector<absl::StatusOr<bool>> done = {cycle_on(0)};
      for (auto& f : others) done.push_back(f.get());
      bool accepted = true;
      for (const absl::StatusOr<bool>& d : done) {
        if (!d.ok()) {
          tally.error = d.status();
          return;
        }
        accepted = accepted && *d;
      }
      const absl::Time end = absl::Now();
      if (end > measure_end) break;
      if (end >= measure_start) {
        ++tally.cycles;
        if (!accepted) ++tally.rejected;
        tally.latencies_ms.push_back(absl::ToDoubleMilliseconds(end - begin));
      }
    }
  };

  std::vector<std::thread> threads;
  threads.reserve(clients);
  for (int i = 0; i < clients; ++i) threads.emplace_back(run_client, i);
  joined.Wait();
  measure_start = absl::Now() + warmup;
  if (const double at = absl::GetFlag(FLAGS_measure_at_unix_seconds); at > 0) {
    // Clients in other processes measure the same seconds.
    measure_start = std::max(measure_start, absl::FromUnixMicros(static_cast<int64_t>(at * 1e6)));
  }
  measure_end = measure_start + measured;
  go.Notify();
  for (std::thread& t : threads) t.join();

  CycleResult result;
  std::vector<double> latencies;
  uint64_t cycles = 0;
  for (const ClientTally& tally : tallies) {
    if (!tally.error.ok()) return tally.error;
    cycles += tally.cycles;
    result.rejected += tally.rejected;
    latencies.insert(latencies.end(), tally.latencies_ms.begin(), tally.latencies_ms.end());
  }
  std::sort(latencies.begin(), latencies.end());
  result.cycles_per_s = static_cast<double>(cycles) / absl::ToDoubleSeconds(measured);
  result.p50_ms = Percentile(latencies, 0.50);
  result.p99_ms = Percentile(latencies, 0.99);
  return result;
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

const char* Name(TensorEncoding encoding) {
  return encoding == TensorEncoding::kBf16 ? "bf16" : "fp32";
}

// RESULT keys carry no prefix for fp32 (the headline) and "bf16_" for bf16 pushes.
std::string KeyPrefix(TensorEncoding encoding) {
  return encoding == TensorEncoding::kBf16 ? "bf16_" : "";
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

// One measurement of one configuration, with the limit measured just before it (none against an
// external server, whose machine this is not).
struct Sample {
  CycleResult cycles;
  std::optional<Limit> limit;
};

struct Configuration {
  TensorEncoding push;
  int clients;
  std::vector<Sample> samples;
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
  const bool in_process = absl::GetFlag(FLAGS_ps).empty();
  if (in_process) {
    g_security.insecure = true;
  } else {
    absl::StatusOr<ClientSecurity> security = ClientSecurityFromFlags();
    if (!security.ok()) {
      LOG(ERROR) << security.status();
      return 2;
    }
    g_security = *std::move(security);
  }
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
  // The in-process server logs a line per joining client: hundreds over a run.
  if (!absl::GetFlag(FLAGS_server_info_logs)) FLAGS_minloglevel = google::GLOG_WARNING;

  std::printf("convoy_bench_ps: model %s, %zu parameters (%.2f MB fp32), %u hardware threads\n",
              model->spec.name.c_str(), parameters, fp32_bytes / 1e6,
              std::thread::hardware_concurrency());
  for (TensorEncoding push : *encodings) {
    std::printf("  %s push: %.2f MB per cycle (push + fp32 pull)\n", Name(push),
                bytes_per_cycle(push) / 1e6);
  }
  std::fflush(stdout);

  std::unique_ptr<GrpcParameterServer> server;
  std::string address = absl::GetFlag(FLAGS_ps);
  if (in_process) {
    ParameterServerOptions options;
    options.model = absl::GetFlag(FLAGS_model);
    options.optimizer.kind = absl::GetFlag(FLAGS_optimizer);
    absl::StatusOr<std::unique_ptr<ParameterServer>> core = ParameterServer::Create(options);
    if (!core.ok()) {
      LOG(ERROR) << "cannot create the parameter server: " << core.status();
      return 1;
    }
    absl::StatusOr<std::unique_ptr<GrpcParameterServer>> started =
        GrpcParameterServer::Start(*std::move(core), "127.0.0.1:0", [] {
          ServerSecurity plaintext;  // Loopback inside one process: TLS would measure OpenSSL.
          plaintext.insecure = true;
          return plaintext;
        }());
    if (!started.ok()) {
      LOG(ERROR) << "cannot start the parameter server: " << started.status();
      return 1;
    }
    server = *std::move(started);
    address = absl::StrCat("127.0.0.1:", server->port());
  }
  std::printf(
      "\nPush+pull cycles against %s (%s), %.1f s measured after %.1f s warm-up each, %d "
      "repeats interleaved%s\n",
      address.c_str(), in_process ? "in-process server" : "external server", seconds,
      warmup_seconds, repeats,
      in_process ? "; before each, the limit: loopback TCP, apply, apply + publish" : "");
  std::printf("%-3s %-5s %7s %10s %8s %8s %7s %8s %8s %9s %8s %8s\n", "rep", "push", "clients",
              "cycles/s", "p50 ms", "p99 ms", "MB/s", "TCP GB/s", "apply/s", "+publish", "limit",
              "fraction");
  std::fflush(stdout);

  std::vector<Configuration> configurations;
  for (TensorEncoding push : *encodings) {
    for (int clients : *client_counts) configurations.push_back({push, clients, {}});
  }
  for (int repeat = 1; repeat <= repeats; ++repeat) {
    for (Configuration& configuration : configurations) {
      Sample sample;
      if (in_process) {
        absl::StatusOr<Limit> limit = MeasureLimit(parameters);
        if (!limit.ok()) {
          LOG(ERROR) << "measuring the limit failed: " << limit.status();
          return 1;
        }
        sample.limit = *limit;
      }
      absl::StatusOr<CycleResult> r =
          MeasureCycles(address, *model, configuration.push, configuration.clients,
                        absl::Seconds(warmup_seconds), absl::Seconds(seconds));
      if (!r.ok()) {
        LOG(ERROR) << Name(configuration.push) << " with " << configuration.clients
                   << " clients failed: " << r.status();
        return 1;
      }
      sample.cycles = *r;
      std::printf("%-3d %-5s %7d %10.1f %8.2f %8.2f %7.0f", repeat, Name(configuration.push),
                  configuration.clients, r->cycles_per_s, r->p50_ms, r->p99_ms,
                  r->cycles_per_s * bytes_per_cycle(configuration.push) / 1e6);
      if (sample.limit) {
        const double limit = limit_for(*sample.limit, configuration.push);
        std::printf(" %8.2f %8.1f %9.1f %8.1f %8.3f", sample.limit->tcp_bytes_per_s / 1e9,
                    sample.limit->apply.apply_per_s, sample.limit->apply.apply_publish_per_s, limit,
                    r->cycles_per_s / limit);
      }
      std::printf("\n");
      std::fflush(stdout);
      configuration.samples.push_back(sample);
    }
  }

  std::printf(
      "\nMedians over %d repeats (spread: least-greatest). fraction: of the limit measured just "
      "before each repeat;\nof ceiling: of the server's serial ceiling (apply + publish) then.\n",
      repeats);
  std::printf("%-5s %7s %10s %15s %8s %8s %8s %8s %15s %9s %9s %9s\n", "push", "clients",
              "cycles/s", "spread", "p50 ms", "p99 ms", "limit", "fraction", "spread", "ceiling",
              "of ceil.", "rejected");
  std::vector<std::string> results;
  auto result = [&](const std::string& key, double value) {
    results.push_back(absl::StrFormat("RESULT %s=%.6g", key, value));
  };
  for (const Configuration& configuration : configurations) {
    const std::vector<Sample>& samples = configuration.samples;
    const TensorEncoding push = configuration.push;
    const Spread cycles = SpreadOf(samples, [](const Sample& s) { return s.cycles.cycles_per_s; });
    const double p50 = SpreadOf(samples, [](const Sample& s) { return s.cycles.p50_ms; }).median;
    const double p99 = SpreadOf(samples, [](const Sample& s) { return s.cycles.p99_ms; }).median;
    uint64_t rejected = 0;
    for (const Sample& s : samples) rejected += s.cycles.rejected;
    const std::string prefix = KeyPrefix(push);
    const std::string n = absl::StrCat(configuration.clients);
    result(absl::StrCat(prefix, "cycles_per_s_", n), cycles.median);
    result(absl::StrCat(prefix, "cycles_per_s_min_", n), cycles.min);
    result(absl::StrCat(prefix, "cycles_per_s_max_", n), cycles.max);
    result(absl::StrCat(prefix, "p50_ms_", n), p50);
    result(absl::StrCat(prefix, "p99_ms_", n), p99);
    std::printf("%-5s %7d %10.1f %7.1f-%-7.1f %8.2f %8.2f", Name(push), configuration.clients,
                cycles.median, cycles.min, cycles.max, p50, p99);
    if (in_process) {
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
      std::printf(" %8.1f %8.3f %7.3f-%-7.3f %9.1f %9.3f", limit.median, fraction.median,
                  fraction.min, fraction.max, ceiling.median, of_ceiling.median);
      result(absl::StrCat(prefix, "limit_cycles_per_s_", n), limit.median);
      result(absl::StrCat(prefix, "fraction_of_limit_", n), fraction.median);
      result(absl::StrCat(prefix, "fraction_of_limit_min_", n), fraction.min);
      result(absl::StrCat(prefix, "fraction_of_limit_max_", n), fraction.max);
      result(absl::StrCat(prefix, "serial_ceiling_per_s_", n), ceiling.median);
      result(absl::StrCat(prefix, "fraction_of_serial_ceiling_", n), of_ceiling.median);
    } else {
      std::printf(" %8s %8s %15s %9s %9s", "-", "-", "-", "-", "-");
    }
    std::printf(" %9llu\n", static_cast<unsigned long long>(rejected));
  }
  if (server != nullptr) {
    const v1::StatusResponse status = server->core().Status();
    std::printf("\nServer: version %llu, %llu updates applied\n",
                static_cast<unsigned long long>(status.version()),
                static_cast<unsigned long long>(status.updates_applied()));
    if (absl::Status s = server->Shutdown(absl::Seconds(1)); !s.ok()) LOG(WARNING) << s;
  }

  result("parameters", static_cast<double>(parameters));
  if (in_process) {
    // The machine over the whole run: medians of every repeat's limit measurement.
    std::vector<Sample> all;
    for (const Configuration& c : configurations)
      all.insert(all.end(), c.samples.begin(), c.samples.end());
    result("tcp_bytes_per_s",
           SpreadOf(all, [](const Sample& s) { return s.limit->tcp_bytes_per_s; }).median);
    result("apply_per_s",
           SpreadOf(all, [](const Sample& s) { return s.limit->apply.apply_per_s; }).median);
    result("apply_publish_per_s", SpreadOf(all, [](const Sample& s) {
                                    return s.limit->apply.apply_publish_per_s;
                                  }).median);
  }
  for (TensorEncoding push : *encodings) {
    result(absl::StrCat(KeyPrefix(push), "bytes_per_cycle"), bytes_per_cycle(push));
  }
  std::printf("\n");
  for (const std::string& line : results) std::printf("%s\n", line.c_str());
  return 0;
}

}  // namespace
}  // namespace convoy

int main(int argc, char** argv) {
  convoy::InitProcess(
      argc, argv,
      "Push+pull cycles/s of a parameter server with 1..N concurrent clients over loopback,\n"
      "each measurement repeated (--repeats, interleaved) after its own measurement of the\n"
      "machine's limit (loopback TCP bytes/s, the optimizer's apply rate, apply + publish).\n"
      "Reports medians and spreads; ends with RESULT key=value lines.\n"
      "Usage: convoy_bench_ps [--clients=1,4,16,64] [--encodings=fp32,bf16] [--seconds=5]\n"
      "                       [--repeats=3] [--ps=host:port,...]");
  return convoy::Run();
}
