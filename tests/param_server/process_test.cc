// Tests of the convoy_ps binary as a user runs it: flags, signals, checkpoints and restarts.
#include <signal.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <filesystem>
#include <thread>

#include "absl/strings/str_cat.h"
#include "agent/ps_client.h"
#include "common/model_registry.h"
#include "param_server/checkpointer.h"
#include "tests/support/subprocess.h"

namespace convoy {
namespace {

namespace fs = std::filesystem;
using testing::MakeTempDir;
using testing::ReadWholeFile;
using testing::Subprocess;
using testing::WaitForFileLine;

struct PsProcess {
  std::string dir;
  std::string log;
  int port = 0;
  std::optional<Subprocess> process;

  // Starts convoy_ps on `port` (0: a free one) with checkpoints in dir/ckpt.
  void Start(int requested_port, std::vector<std::string> extra = {}) {
    const std::string port_file = absl::StrCat(dir, "/port");
    fs::remove(port_file);
    std::vector<std::string> argv = {CONVOY_PS_BINARY,
                                     "--model=tiny",
                                     "--bind=127.0.0.1",
                                     absl::StrCat("--port=", requested_port),
                                     absl::StrCat("--port_file=", port_file),
                                     absl::StrCat("--checkpoint_dir=", dir, "/ckpt"),
                                     "--checkpoint_every_seconds=0",
                                     "--insecure"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    absl::StatusOr<Subprocess> started = Subprocess::Start(argv, log);
    REQUIRE(started.ok());
    process = *std::move(started);
    absl::StatusOr<std::string> line = WaitForFileLine(port_file, absl::Seconds(60));
    INFO(ReadWholeFile(log));
    REQUIRE(line.ok());
    port = std::stoi(*line);
  }

  PsClientOptions ClientOptions(const std::string& id) const {
    PsClientOptions o;
    o.address = absl::StrCat("127.0.0.1:", port);
    o.agent_id = id;
    o.model_fingerprint = DescribeModel("tiny")->fingerprint;
    o.retry_for = absl::Seconds(60);
    o.backoff.max = absl::Milliseconds(500);
    return o;
  }
};

PsProcess NewPs() {
  PsProcess ps;
  ps.dir = MakeTempDir("convoy_ps");
  ps.log = ps.dir + "/convoy_ps.log";
  return ps;
}

TEST_CASE("convoy_ps --help documents its flags", "[process]") {
  const std::string dir = MakeTempDir("convoy_ps_help");
  absl::StatusOr<Subprocess> help = Subprocess::Start({CONVOY_PS_BINARY, "--help"}, dir + "/out");
  REQUIRE(help.ok());
  const std::optional<int> code = help->Wait(absl::Seconds(30));
  REQUIRE(code.has_value());
  const std::string out = ReadWholeFile(dir + "/out");
  for (const char* flag :
       {"--port", "--bind", "--model", "--checkpoint_dir", "--resume", "--keep_checkpoints",
        "--checkpoint_every_updates", "--checkpoint_every_seconds", "--optimizer",
        "--learning_rate", "--max_grad_norm", "--max_staleness", "--staleness_lr_scaling",
        "--target_update_frequency", "--exploration", "--min_epsilon",
        "--per_iter_epsilon_reduction", "--init_checkpoint", "--seed"}) {
    INFO(flag);
    CHECK_THAT(out, Catch::Contains(std::string(flag) + ")") || Catch::Contains(flag));
  }
}

TEST_CASE("convoy_ps refuses bad flags with a clear error", "[process]") {
  PsProcess ps = NewPs();
  absl::StatusOr<Subprocess> bad =
      Subprocess::Start({CONVOY_PS_BINARY, "--model=resnet", "--port=0", "--insecure"}, ps.log);
  REQUIRE(bad.ok());
  CHECK(bad->Wait(absl::Seconds(30)) == 1);
  CHECK_THAT(ReadWholeFile(ps.log), Catch::Contains("unknown model 'resnet'"));
}

TEST_CASE("A second convoy_ps on a port in use fails instead of sharing it", "[process]") {
  PsProcess first = NewPs();
  first.Start(0);
  PsProcess second = NewPs();
  absl::StatusOr<Subprocess> clash =
      Subprocess::Start({CONVOY_PS_BINARY, "--model=tiny", "--bind=127.0.0.1",
                         absl::StrCat("--port=", first.port), "--insecure"},
                        second.log);
  REQUIRE(clash.ok());
  CHECK(clash->Wait(absl::Seconds(30)) == 1);
  CHECK_THAT(ReadWholeFile(second.log), Catch::Contains("cannot listen on"));
  // The first one still serves.
  PsClient client(first.ClientOptions("a"));
  CHECK(client.Join().ok());
}

TEST_CASE("SIGTERM drains and checkpoints and exits 0 and a resumed server continues the version",
          "[process]") {
  PsProcess ps = NewPs();
  ps.Start(0);
  {
    PsClient client(ps.ClientOptions("a"));
    REQUIRE(client.Join().ok());
    std::vector<float> g(DescribeModel("tiny")->parameter_count, 0.01f);
    for (uint64_t v = 0; v < 5; ++v) REQUIRE(client.Push(g.data(), g.size(), v, 1)->accepted);
  }
  ps.process->Signal(SIGTERM);
  CHECK(ps.process->Wait(absl::Seconds(30)) == 0);
  CHECK(Checkpointer::VerifyManifest(ps.dir + "/ckpt/ckpt-00000000000000000005").ok());

  ps.Start(0, {"--resume"});
  PsClient client(ps.ClientOptions("a"));
  absl::StatusOr<v1::JoinResponse> joined = client.Join();
  REQUIRE(joined.ok());
  CHECK(joined->version() == 5);
  std::vector<float> g(joined->parameter_count(), 0.01f);
  absl::StatusOr<PushResult> pushed = client.Push(g.data(), g.size(), 5, 1);
  REQUIRE(pushed.ok());
  CHECK(pushed->version == 6);
  ps.process->Signal(SIGINT);
  CHECK(ps.process->Wait(absl::Seconds(30)) == 0);
}

TEST_CASE("A client rides out a killed and restarted server", "[process]") {
  PsProcess ps = NewPs();
  ps.Start(0, {"--checkpoint_every_updates=3"});
  const int port = ps.port;
  PsClient client(ps.ClientOptions("rider"));
  REQUIRE(client.Join().ok());
  std::vector<float> g(DescribeModel("tiny")->parameter_count, 0.01f);
  uint64_t version = 0;
  for (int i = 0; i < 6; ++i) version = client.Push(g.data(), g.size(), version, 1)->version;
  REQUIRE(version == 6);
  // The periodic checkpoint at 6 updates is written by a background thread; wait for it.
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (!Checkpointer::VerifyManifest(ps.dir + "/ckpt/ckpt-00000000000000000006").ok() &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  ps.process->Signal(SIGKILL);
  REQUIRE(ps.process->Wait(absl::Seconds(10)).has_value());

  // Restart on the same port a moment later, while the client is already retrying.
  std::thread restarter([&] {
    absl::SleepFor(absl::Milliseconds(700));
    ps.Start(port, {"--resume"});
  });
  absl::StatusOr<PushResult> pushed = client.Push(g.data(), g.size(), version, 1);
  restarter.join();
  REQUIRE(pushed.ok());
  // The server came back at the checkpointed version 6, so the push applies as version 7.
  CHECK(pushed->accepted);
  CHECK(pushed->version == 7);
  ps.process->Signal(SIGTERM);
  CHECK(ps.process->Wait(absl::Seconds(30)) == 0);
}

}  // namespace
}  // namespace convoy
