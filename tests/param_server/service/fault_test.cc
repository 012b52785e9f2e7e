// Fault injection with real processes: convoy_ps killed and restarted under running agents, an
// agent killed in the middle of a push, a checkpoint disk that fills up, and many concurrent
// clients for a bounded time.
#include <signal.h>
#include <sys/mount.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/client/ps_client.h"
#include "common/model/model_registry.h"
#include "common/wire/security.h"
#include "param_server/core/checkpointer.h"
#include "tests/catch.h"
#include "tests/param_server/service/loopback_server.h"
#include "tests/skip.h"
#include "tests/support/subprocess.h"

namespace convoy::ps {
namespace {

namespace fs = std::filesystem;
using testing::MakeTempDir;
using testing::ReadWholeFile;
using testing::Subprocess;
using testing::WaitForFileLine;
using testing::WaitUntil;

// convoy_ps as a cluster runs it: TLS and a bearer token from `convoy_ps --write_credentials`,
// which the first Start runs; clients dial 127.0.0.1 and check the certificate's name convoy-ps.
struct PsUnderTest {
  std::string dir;
  std::string model = "compact";
  std::vector<std::string> extra;
  std::optional<Subprocess> process;
  int port = 0;

  std::string auth_dir() const { return dir + "/auth"; }

  // The flags a client process needs besides --ps.
  std::vector<std::string> ClientFlags() const {
    return {"--tls_ca=" + auth_dir() + "/ca.crt", "--tls_server_name=convoy-ps",
            "--auth_token_file=" + auth_dir() + "/auth_token"};
  }

  void Start(bool resume) {
    if (!fs::exists(auth_dir() + "/auth_token")) {
      absl::StatusOr<Subprocess> writer = Subprocess::Start(
          {CONVOY_PS_BINARY, "--write_credentials=" + auth_dir()}, dir + "/credentials.log");
      REQUIRE(writer.ok());
      INFO(ReadWholeFile(dir + "/credentials.log"));
      REQUIRE(writer->Wait(absl::Seconds(60)) == 0);
    }
    const std::string port_file = dir + "/port";
    fs::remove(port_file);
    std::vector<std::string> argv = {CONVOY_PS_BINARY,
                                     "--model=" + model,
                                     "--bind=127.0.0.1",
                                     absl::StrCat("--port=", port),
                                     "--port_file=" + port_file,
                                     "--checkpoint_dir=" + dir + "/ckpt",
                                     "--checkpoint_every_seconds=0",
                                     "--tls_cert=" + auth_dir() + "/tls.crt",
                                     "--tls_key=" + auth_dir() + "/tls.key",
                                     "--auth_token_file=" + auth_dir() + "/auth_token"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    if (resume) argv.push_back("--resume");
    absl::StatusOr<Subprocess> started = Subprocess::Start(argv, dir + "/ps.log");
    REQUIRE(started.ok());
    process = *std::move(started);
    absl::StatusOr<std::string> line = WaitForFileLine(port_file, absl::Seconds(60));
    INFO(ReadWholeFile(dir + "/ps.log"));
    REQUIRE(line.ok());
    port = std::stoi(*line);
  }

  std::string address() const { return absl::StrCat("127.0.0.1:", port); }

  std::unique_ptr<agent::PsClient> Client(const std::string& id) const {
    agent::PsClientOptions o;
    o.address = address();
    o.agent_id = id;
    o.model_fingerprint = DescribeModel(model)->fingerprint;
    o.retry_for = absl::Seconds(30);
    o.backoff.max = absl::Milliseconds(300);
    o.security.insecure = false;
    o.security.tls_ca_file = auth_dir() + "/ca.crt";
    o.security.tls_server_name = "convoy-ps";
    o.security.auth_token = *ReadAuthToken(auth_dir() + "/auth_token");
    absl::StatusOr<std::unique_ptr<agent::PsClient>> client = agent::PsClient::Create(o);
    REQUIRE(client.ok());
    return *std::move(client);
  }
};

// A client that sends the first two chunks of a push and then neither sends nor closes (the
// cookbook model's push has four), started once it has stalled.
std::optional<Subprocess> StartStalledPush(const PsUnderTest& ps) {
  const std::string log = ps.dir + "/stalled.log";
  std::vector<std::string> argv = {CONVOY_SYNTHETIC_AGENT_BINARY, "--ps=" + ps.address(),
                                   "--model=cookbook", "--agent_id=stalled",
                                   "--stall_after_chunks=2"};
  for (const std::string& flag : ps.ClientFlags()) argv.push_back(flag);
  absl::StatusOr<Subprocess> stalled = Subprocess::Start(argv, log);
  REQUIRE(stalled.ok());
  REQUIRE(WaitUntil([&] { return ReadWholeFile(log).find("STALLED") != std::string::npos; },
                    absl::Seconds(60)));
  return *std::move(stalled);
}

// The last `bytes` of a log file.
std::string LogTail(const std::string& path, size_t bytes = 3000) {
  const std::string log = ReadWholeFile(path);
  return log.size() <= bytes ? log : log.substr(log.size() - bytes);
}

// Every checkpoint directory verifies; returns the newest version (0 when none).
uint64_t VerifyAllCheckpoints(const std::string& dir) {
  uint64_t newest = 0;
  if (!fs::exists(dir)) return 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("ckpt-", 0) != 0) continue;  // Temporary directories of an interrupted write.
    absl::StatusOr<v1::CheckpointManifest> manifest = Checkpointer::VerifyManifest(entry.path());
    INFO(name << ": " << manifest.status());
    REQUIRE(manifest.ok());
    newest = std::max<uint64_t>(newest, manifest->version());
  }
  return newest;
}

TEST_CASE("convoy_ps killed and resumed 20 times under running agents loses no checkpoint",
          "[faults]") {
  PsUnderTest ps;
  ps.dir = MakeTempDir("ps_kill");
  ps.extra = {"--checkpoint_every_updates=3"};
  ps.Start(false);
  std::vector<Subprocess> agents;
  for (int i = 0; i < 2; ++i) {
    std::vector<std::string> argv = {CONVOY_AGENT_BINARY,
                                     "--ps=" + ps.address(),
                                     absl::StrCat("--agent_id=agent-", i),
                                     absl::StrCat("--agent_index=", i),
                                     absl::StrCat("--seed=", 1 + i),
                                     "--model=compact",
                                     "--min_replay_size=100",
                                     "--replay_memory_size=5000",
                                     "--torch_threads=1",
                                     "--max_minutes=20",
                                     "--report_seconds=2"};
    for (const std::string& flag : ps.ClientFlags()) argv.push_back(flag);
    absl::StatusOr<Subprocess> agent =
        Subprocess::Start(argv, absl::StrCat(ps.dir, "/agent-", i, ".log"));
    REQUIRE(agent.ok());
    agents.push_back(*std::move(agent));
  }
  std::unique_ptr<agent::PsClient> status_client = ps.Client("observer");
  // The server's status; all zeros while it is down.
  auto status = [&]() -> v1::StatusResponse {
    absl::StatusOr<v1::StatusResponse> s = status_client->Status();
    return s.ok() ? *std::move(s) : v1::StatusResponse();
  };
  auto version = [&] { return status().version(); };
  uint64_t last_resumed = 0;
  absl::Duration slowest_rejoin;
  std::vector<absl::Duration> rejoins;
  for (int cycle = 0; cycle < 20; ++cycle) {
    INFO("cycle " << cycle);
    // Agents push past the version the server resumed at, and one new checkpoint is written: the
    // kill may still land in the middle of the next.
    REQUIRE(WaitUntil(
        [&] {
          const v1::StatusResponse s = status();
          return s.version() >= last_resumed + 4 && s.checkpoint_version() > last_resumed;
        },
        absl::Seconds(90)));
    ps.process->Signal(SIGKILL);
    REQUIRE(ps.process->Wait(absl::Seconds(10)).has_value());
    const uint64_t newest = VerifyAllCheckpoints(ps.dir + "/ckpt");
    CHECK(newest >= last_resumed);
    const absl::Time restart = absl::Now();
    ps.Start(true);
    // The server continues from its newest checkpoint, and the agents are back within seconds.
    const std::string log = ReadWholeFile(ps.dir + "/ps.log");
    const size_t at = log.rfind(" at version ");
    REQUIRE(log.rfind("resumed from") != std::string::npos);
    REQUIRE(at != std::string::npos);
    const uint64_t resumed = std::stoull(log.substr(at + 12));
    CHECK(resumed == newest);
    if (!WaitUntil([&] { return version() > resumed; }, absl::Seconds(60))) {
      FAIL("no push within 60 s of the restart; what the agents did:\nagent-0 log ends:\n"
           << LogTail(ps.dir + "/agent-0.log") << "\nagent-1 log ends:\n"
           << LogTail(ps.dir + "/agent-1.log"));
    }
    rejoins.push_back(absl::Now() - restart);
    slowest_rejoin = std::max(slowest_rejoin, rejoins.back());
    last_resumed = resumed;
    for (Subprocess& agent : agents) REQUIRE(agent.running());
  }
  INFO("rejoin after each restart: " << absl::StrJoin(rejoins, ", ", absl::StreamFormatter()));
  CHECK(slowest_rejoin < absl::Seconds(30));
  for (Subprocess& agent : agents) agent.Signal(SIGTERM);
  for (Subprocess& agent : agents) CHECK(agent.Wait(absl::Seconds(60)) == 0);
  ps.process->Signal(SIGTERM);
  CHECK(ps.process->Wait(absl::Seconds(30)) == 0);
  VerifyAllCheckpoints(ps.dir + "/ckpt");
}

TEST_CASE("An agent killed in the middle of a push leaves no partial update", "[faults]") {
  PsUnderTest ps;
  ps.dir = MakeTempDir("agent_kill");
  ps.model = "cookbook";  // Four chunks per push.
  ps.Start(false);
  std::optional<Subprocess> stalled = StartStalledPush(ps);
  std::unique_ptr<agent::PsClient> other = ps.Client("other");
  const std::vector<float> before = [&] {
    std::vector<float> w;
    REQUIRE(other->Pull(0, 0, v1::NETWORK_ONLINE, &w).ok());
    return w;
  }();
  stalled->Signal(SIGKILL);
  REQUIRE(stalled->Wait(absl::Seconds(10)).has_value());
  // The half-sent push is counted as a rejection and nothing was applied.
  auto rejected = [&]() -> uint64_t {
    absl::StatusOr<v1::StatusResponse> s = other->Status();
    if (!s.ok()) return 0;
    uint64_t n = 0;
    for (const auto& [reason, count] : s->rejections()) n += count;
    return n;
  };
  CHECK(WaitUntil([&] { return rejected() == 1; }, absl::Seconds(30)));
  std::vector<float> after;
  REQUIRE(other->Pull(0, 0, v1::NETWORK_ONLINE, &after).ok());
  CHECK(after == before);
  CHECK(other->Status()->version() == 0);
  // The server keeps serving the others.
  const std::vector<float> g(before.size(), 0.01f);
  absl::StatusOr<PushAnswer> pushed = other->Push(g.data(), g.size(), 0, 1);
  REQUIRE(pushed.ok());
  CHECK(pushed->accepted);
  CHECK(pushed->version == 1);
}

TEST_CASE("A stalled push stream is cancelled after the idle timeout and nothing is applied",
          "[faults]") {
  PsUnderTest ps;
  ps.dir = MakeTempDir("stalled_push");
  ps.model = "cookbook";  // Four chunks per push.
  ps.extra = {"--stream_idle_timeout_seconds=2"};
  ps.Start(false);
  std::optional<Subprocess> stalled = StartStalledPush(ps);
  std::unique_ptr<agent::PsClient> other = ps.Client("other");
  // The stalled client is still alive and holds its stream open; the server gives up on it.
  auto cancelled = [&]() -> uint64_t {
    absl::StatusOr<v1::StatusResponse> s = other->Status();
    if (!s.ok()) return 0;
    auto it = s->rejections().find("REJECT_REASON_CANCELLED");
    return it == s->rejections().end() ? 0 : it->second;
  };
  CHECK(WaitUntil([&] { return cancelled() == 1; }, absl::Seconds(30)));
  CHECK(stalled->running());
  CHECK(other->Status()->version() == 0);
  const std::vector<float> g(DescribeModel("cookbook")->parameter_count, 0.01f);
  absl::StatusOr<PushAnswer> pushed = other->Push(g.data(), g.size(), 0, 1);
  REQUIRE(pushed.ok());
  CHECK(pushed->accepted);
  CHECK(pushed->version == 1);
  stalled->Signal(SIGKILL);
  stalled->Wait(absl::Seconds(10));
  ps.process->Signal(SIGTERM);
  CHECK(ps.process->Wait(absl::Seconds(30)) == 0);
}

TEST_CASE("A full checkpoint disk is a clear error and training continues", "[faults]") {
  if (::geteuid() != 0) {
    CONVOY_SKIP("mounting a small tmpfs for the checkpoint directory needs root");
  }
  PsUnderTest ps;
  ps.dir = MakeTempDir("disk_full");
  fs::create_directories(ps.dir + "/ckpt");
  // One compact checkpoint is about 3.8 MB (weights, target and averaged network 0.76 MB each, the
  // optimizer's moments 1.5 MB): the first fits in 4 MiB, the second does not.
  if (::mount("tmpfs", (ps.dir + "/ckpt").c_str(), "tmpfs", 0, "size=4m") != 0) {
    CONVOY_SKIP("cannot mount a tmpfs here: " << std::strerror(errno));
  }
  ps.extra = {"--checkpoint_every_updates=2", "--keep_checkpoints=3"};
  ps.Start(false);
  std::unique_ptr<agent::PsClient> client = ps.Client("a");
  std::vector<float> g(DescribeModel("compact")->parameter_count, 0.01f);
  for (uint64_t v = 0; v < 2; ++v) REQUIRE(client->Push(g.data(), g.size(), v, 1)->accepted);
  REQUIRE(
      WaitUntil([&] { return client->Status()->checkpoints_written() == 1; }, absl::Seconds(30)));
  for (uint64_t v = 2; v < 6; ++v) REQUIRE(client->Push(g.data(), g.size(), v, 1)->accepted);
  CHECK(WaitUntil([&] { return client->Status()->checkpoint_failures() >= 1; }, absl::Seconds(30)));
  // Training goes on, the error names the cause, and the first checkpoint is intact.
  absl::StatusOr<PushAnswer> pushed = client->Push(g.data(), g.size(), 6, 1);
  REQUIRE(pushed.ok());
  CHECK(pushed->version == 7);
  CHECK_THAT(ReadWholeFile(ps.dir + "/ps.log"),
             Catch::Matchers::ContainsSubstring("No space left on device"));
  CHECK(Checkpointer::VerifyManifest(ps.dir + "/ckpt/ckpt-00000000000000000002").ok());
  ps.process->Signal(SIGKILL);
  ps.process->Wait(absl::Seconds(10));
  ::umount((ps.dir + "/ckpt").c_str());
}

// `clients` PsClients in threads against one in-process server, each pulling the newest weights and
// pushing a small gradient on them in a loop until Stop.
class ConcurrentLoad {
 public:
  ConcurrentLoad(const testing::LoopbackServer& ps, int clients) {
    const size_t n = ps.server->core().model().parameter_count;
    for (int c = 0; c < clients; ++c) {
      threads_.emplace_back([this, &ps, n, c] {
        agent::PsClient client(ps.ClientOptions(absl::StrCat("load-", c)));
        std::vector<float> g(n, 1e-4f);
        testing::PulledWeights newest;
        while (!stop_.load()) {
          if (!newest.Refresh(client).ok()) {
            ++errors;
            continue;
          }
          absl::StatusOr<PushAnswer> pushed = client.Push(g.data(), n, newest.version, 1);
          if (!pushed.ok()) {
            ++errors;
          } else if (pushed->accepted) {
            ++accepted;
          } else if (pushed->reason == v1::REJECT_REASON_STALE) {
            ++stale;
          } else {
            ++errors;
          }
          ++cycles;
        }
      });
    }
  }
  ~ConcurrentLoad() { Stop(); }

  void Stop() {
    stop_ = true;
    for (std::thread& t : threads_) {
      if (t.joinable()) t.join();
    }
  }

  std::atomic<uint64_t> accepted{0}, stale{0}, errors{0}, cycles{0};

 private:
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

TEST_CASE("64 concurrent clients for a bounded time lose nothing", "[faults][load]") {
  ParameterServerOptions options;
  options.model = "compact";
  options.max_staleness = 32;
  testing::LoopbackServer ps(options);
  ConcurrentLoad load(ps, 64);
  // Past the start, where every client's first push lands together, well into the steady state.
  REQUIRE(WaitUntil([&] { return load.accepted.load() > 1500; }, absl::Seconds(180)));
  load.Stop();
  const v1::StatusResponse status = ps.Status();
  CHECK(load.errors.load() == 0);
  CHECK(status.updates_applied() == load.accepted.load());
  // One version per optimizer step, each step one or more of the accepted pushes (batching).
  CHECK(status.version() == status.apply_steps());
  CHECK(status.apply_steps() >= 1);
  CHECK(status.apply_steps() <= status.updates_applied());
  uint64_t rejected = 0;
  for (const auto& [reason, count] : status.rejections()) {
    INFO(reason);
    CHECK(reason == "REJECT_REASON_STALE");
    rejected += count;
  }
  CHECK(rejected == load.stale.load());
}

#if defined(__SANITIZE_ADDRESS__)
#define CONVOY_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CONVOY_TEST_ASAN 1
#endif
#endif

TEST_CASE("64 concurrent clients hold memory flat after warm-up", "[faults][load]") {
#ifdef CONVOY_TEST_ASAN
  // ASan keeps freed blocks in its quarantine (256 MB by default) and never hands them back, so RSS
  // grows for as long as the load frees memory; that growth says nothing about convoy.
  CONVOY_SKIP("RSS under AddressSanitizer measures its quarantine, not convoy");
#endif
  ParameterServerOptions options;
  options.model = "compact";
  options.max_staleness = 32;
  testing::LoopbackServer ps(options);
  auto rss_kb = [] {
    std::ifstream status("/proc/self/status");
    std::string key;
    long value = 0;
    while (status >> key) {
      if (key == "VmRSS:") {
        status >> value;
        return value;
      }
    }
    return 0L;
  };
  ConcurrentLoad load(ps, 64);
  // Warm up, then watch memory over the rest of the run; both spans are counted in the load's
  // pull-push cycles, the work that fills memory, so a slower machine runs them longer.
  // Measured here: RSS climbs for about 20 s while the 64 streams' buffers and malloc's arenas fill
  // (to about 1 GB for 65 threads in one process), then stays within a few MB. On a shared 2-core
  // machine, at about 500 cycles a second, it was flat from about 12,000 cycles on.
  constexpr uint64_t kWarmCycles = 14000;
  constexpr uint64_t kMeasuredCycles = 8000;
  REQUIRE(WaitUntil([&] { return load.cycles.load() >= 200; }, absl::Seconds(60)));
  REQUIRE(WaitUntil([&] { return load.cycles.load() >= kWarmCycles; }, absl::Seconds(300)));
  const long rss_warm = rss_kb();
  REQUIRE(WaitUntil([&] { return load.cycles.load() >= kWarmCycles + kMeasuredCycles; },
                    absl::Seconds(300)));
  const long rss_end = rss_kb();
  load.Stop();
  CHECK(load.errors.load() == 0);
  // Flat: after warm-up, growth stays within a few model-sized buffers (snapshots are pooled).
  INFO("RSS warm " << rss_warm << " kB, end " << rss_end << " kB");
  CHECK(rss_end - rss_warm < 64 * 1024);
}

}  // namespace
}  // namespace convoy::ps
