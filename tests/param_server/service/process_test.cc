// Tests of the convoy_ps binary as a user runs it: flags, signals, checkpoints and restarts; and of
// convoy_train and convoy_status as a user watches a run.
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <thread>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/client/ps_client.h"
#include "common/model/model_registry.h"
#include "common/settings/run_defaults.h"
#include "common/wire/tensor_encoding.h"
#include "param_server/core/checkpointer.h"
#include "param_server/core/parameter_server.h"
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

  agent::PsClientOptions ClientOptions(const std::string& id) const {
    agent::PsClientOptions o;
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
    CHECK_THAT(out, Catch::Matchers::ContainsSubstring(std::string(flag) + ")") ||
                        Catch::Matchers::ContainsSubstring(flag));
  }
}

TEST_CASE("convoy_ps refuses bad flags with a clear error", "[process]") {
  PsProcess ps = NewPs();
  absl::StatusOr<Subprocess> bad =
      Subprocess::Start({CONVOY_PS_BINARY, "--model=resnet", "--port=0", "--insecure"}, ps.log);
  REQUIRE(bad.ok());
  CHECK(bad->Wait(absl::Seconds(30)) == 2);
  CHECK_THAT(ReadWholeFile(ps.log), Catch::Matchers::ContainsSubstring("unknown model 'resnet'"));
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
  CHECK_THAT(ReadWholeFile(second.log), Catch::Matchers::ContainsSubstring("cannot listen on"));
  // The first one still serves.
  agent::PsClient client(first.ClientOptions("a"));
  CHECK(client.Join().ok());
}

TEST_CASE("SIGTERM drains and checkpoints and exits 0 and a resumed server continues the version",
          "[process]") {
  PsProcess ps = NewPs();
  ps.Start(0);
  {
    agent::PsClientOptions options = ps.ClientOptions("a");
    options.hostname = "node-a";
    agent::PsClient client(options);
    REQUIRE(client.Join().ok());
    std::vector<float> g(DescribeModel("tiny")->parameter_count, 0.01f);
    for (uint64_t v = 0; v < 5; ++v) REQUIRE(client.Push(g.data(), g.size(), v, 1)->accepted);
  }
  ps.process->Signal(SIGTERM);
  CHECK(ps.process->Wait(absl::Seconds(30)) == 0);
  CHECK(Checkpointer::VerifyManifest(ps.dir + "/ckpt/ckpt-00000000000000000005").ok());
  // The log's last word is GetStatus's: the version, the wire's bytes, each agent with its host.
  const std::string first_log = ReadWholeFile(ps.log);
  INFO(first_log);
  CHECK_THAT(first_log,
             Catch::Matchers::ContainsSubstring("final status: version 5, updates 5, bytes in "));
  CHECK_THAT(first_log, Catch::Matchers::ContainsSubstring(
                            "agents: a@node-a (5 pushes accepted, 0 rejected)"));

  ps.Start(0, {"--resume"});
  agent::PsClient client(ps.ClientOptions("a"));
  absl::StatusOr<v1::JoinResponse> joined = client.Join();
  REQUIRE(joined.ok());
  CHECK(joined->version() == 5);
  std::vector<float> g(joined->parameter_count(), 0.01f);
  absl::StatusOr<PushAnswer> pushed = client.Push(g.data(), g.size(), 5, 1);
  REQUIRE(pushed.ok());
  CHECK(pushed->version == 6);
  ps.process->Signal(SIGINT);
  CHECK(ps.process->Wait(absl::Seconds(30)) == 0);
}

TEST_CASE("A client rides out a killed and restarted server", "[process]") {
  PsProcess ps = NewPs();
  // A checkpoint after every update: a checkpoint thread that runs late (a loaded machine) still ends at
  // version 6. With every 3 it could take 5 and then owe none at 6, and the server came back at 5.
  ps.Start(0, {"--checkpoint_every_updates=1"});
  const int port = ps.port;
  agent::PsClient client(ps.ClientOptions("rider"));
  REQUIRE(client.Join().ok());
  std::vector<float> g(DescribeModel("tiny")->parameter_count, 0.01f);
  uint64_t version = 0;
  for (int i = 0; i < 6; ++i) version = client.Push(g.data(), g.size(), version, 1)->version;
  REQUIRE(version == 6);
  // The periodic checkpoint of version 6 is written by a background thread; wait for it.
  const std::string checkpoint6 = ps.dir + "/ckpt/ckpt-00000000000000000006";
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (!Checkpointer::VerifyManifest(checkpoint6).ok() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  REQUIRE(Checkpointer::VerifyManifest(checkpoint6).ok());
  ps.process->Signal(SIGKILL);
  REQUIRE(ps.process->Wait(absl::Seconds(10)).has_value());

  // Restart on the same port a moment later, while the client is already retrying. The delay is the
  // scenario, not a wait for something: the client shows no state while it retries, and a restart
  // that came before its first attempt would give the same answer.
  std::thread restarter([&] {
    absl::SleepFor(absl::Milliseconds(700));
    ps.Start(port, {"--resume"});
  });
  absl::StatusOr<PushAnswer> pushed = client.Push(g.data(), g.size(), version, 1);
  restarter.join();
  REQUIRE(pushed.ok());
  // The server came back at the checkpointed version 6, so the push applies as version 7.
  CHECK(pushed->accepted);
  CHECK(pushed->version == 7);
  ps.process->Signal(SIGTERM);
  CHECK(ps.process->Wait(absl::Seconds(30)) == 0);
}

// One push of agent `agent`'s session through the raw stub, as a client sends it (and resends it,
// the same, when its answer was lost): computed on `base_version` of `base_incarnation`.
absl::StatusOr<v1::PushResponse> PushNumbered(const PsProcess& ps, const std::string& agent,
                                              uint64_t session, uint64_t sequence,
                                              uint64_t base_incarnation, uint64_t base_version) {
  const ModelInfo model = *DescribeModel("tiny");
  const std::vector<float> values(model.parameter_count, 0.01f);
  auto stub = v1::ParameterServer::NewStub(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", ps.port), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
  v1::PushResponse response;
  auto writer = stub->PushGradients(&context, &response);
  const size_t per_chunk = ElementsPerChunk(TensorEncoding::kFp32);
  for (size_t offset = 0; offset < values.size(); offset += per_chunk) {
    v1::GradientChunk chunk;
    if (offset == 0) {
      chunk.set_agent_id(agent);
      chunk.set_encoding(v1::ENCODING_FP32);
      chunk.set_minibatch_count(1);
      chunk.set_model_fingerprint(model.fingerprint);
      chunk.set_total_elements(values.size());
      chunk.set_base_version(base_version);
      chunk.set_base_incarnation(base_incarnation);
      chunk.set_push_session(session);
      chunk.set_sequence(sequence);
    }
    chunk.set_offset(offset);
    EncodeTensor(values.data() + offset, std::min(per_chunk, values.size() - offset),
                 TensorEncoding::kFp32, chunk.mutable_data());
    if (!writer->Write(chunk)) break;
  }
  writer->WritesDone();
  const grpc::Status status = writer->Finish();
  if (!status.ok()) return absl::UnavailableError(status.error_message());
  return response;
}

TEST_CASE(
    "A push resent to convoy_ps killed and resumed is applied once, answered as the repeat, "
    "or refused only when computed on lost weights",
    "[process][exactly_once]") {
  PsProcess ps = NewPs();
  const std::vector<std::string> flags = {"--checkpoint_every_updates=2", "--max_staleness=1"};
  ps.Start(0, flags);
  agent::PsClient watcher(ps.ClientOptions("watcher"));
  const uint64_t a = watcher.Status()->incarnation();
  REQUIRE(PushNumbered(ps, "p", 7, 1, a, 0)->version() == 1);
  REQUIRE(PushNumbered(ps, "p", 7, 2, a, 1)->version() == 2);
  // The periodic checkpoint of version 2 (p's push 2 in it) is written by a background thread.
  const std::string checkpoint2 = ps.dir + "/ckpt/ckpt-00000000000000000002";
  REQUIRE(
      WaitUntil([&] { return Checkpointer::VerifyManifest(checkpoint2).ok(); }, absl::Seconds(30)));
  REQUIRE(PushNumbered(ps, "q", 8, 1, a, 2)->version() == 3);  // Lost with the kill.
  ps.process->Signal(SIGKILL);
  REQUIRE(ps.process->Wait(absl::Seconds(10)).has_value());

  std::vector<std::string> resume = flags;
  resume.push_back("--resume");
  ps.Start(0, resume);
  agent::PsClient client(ps.ClientOptions("watcher"));
  REQUIRE(client.Status()->version() == 2);
  const uint64_t b = client.Status()->incarnation();

  // p's push 2, whose answer was lost before the kill: the checkpoint holds it.
  absl::StatusOr<v1::PushResponse> repeat = PushNumbered(ps, "p", 7, 2, a, 1);
  REQUIRE(repeat.ok());
  CHECK(repeat->accepted());
  CHECK(repeat->repeated());
  CHECK(repeat->version() == 2);
  CHECK(repeat->incarnation() == a);
  // q's push, computed on the checkpointed version 2 and applied only after it: applied here, once.
  absl::StatusOr<v1::PushResponse> applied = PushNumbered(ps, "q", 8, 1, a, 2);
  REQUIRE(applied.ok());
  CHECK(applied->accepted());
  CHECK_FALSE(applied->repeated());
  CHECK(applied->version() == 3);
  CHECK(applied->incarnation() == b);
  CHECK(PushNumbered(ps, "q", 8, 1, a, 2)->repeated());
  // Computed on version 3 of the killed start, which no checkpoint holds, or on a start this
  // server's weights never came from: refused, naming the base and the lineage.
  absl::StatusOr<v1::PushResponse> lost = PushNumbered(ps, "r", 9, 1, a, 3);
  REQUIRE(lost.ok());
  CHECK_FALSE(lost->accepted());
  CHECK(lost->reason() == v1::REJECT_REASON_BASE_NOT_IN_LINEAGE);
  CHECK_THAT(
      lost->message(),
      Catch::Matchers::ContainsSubstring(absl::StrCat("base version 3 of incarnation ", a)) &&
          Catch::Matchers::ContainsSubstring(absl::StrCat("incarnation ", a, " versions 0..2")));
  const uint64_t stranger = (a ^ b) | 1;
  CHECK(PushNumbered(ps, "s", 10, 1, stranger, 1)->reason() ==
        v1::REJECT_REASON_BASE_NOT_IN_LINEAGE);
  // Computed on the checkpointed version 1, now 2 versions old: the staleness rule refuses it.
  absl::StatusOr<v1::PushResponse> stale = PushNumbered(ps, "t", 11, 1, a, 1);
  REQUIRE(stale.ok());
  CHECK(stale->reason() == v1::REJECT_REASON_STALE);
  CHECK(stale->staleness() == 2);

  const v1::StatusResponse status = *client.Status();
  CHECK(status.version() == 3);
  CHECK(status.repeated_pushes() == 2);
  CHECK(status.rejections().at("REJECT_REASON_BASE_NOT_IN_LINEAGE") == 2);
  ps.process->Signal(SIGTERM);
  CHECK(ps.process->Wait(absl::Seconds(30)) == 0);
}

std::map<std::string, std::string> TreeContents(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    files[e.path().string()] = e.is_regular_file() ? ReadWholeFile(e.path().string()) : "(dir)";
  }
  return files;
}

TEST_CASE("convoy_ps without --resume on another run's checkpoints exits 2 and touches nothing",
          "[process][checkpoint]") {
  PsProcess ps = NewPs();
  ps.Start(0);
  {
    agent::PsClient client(ps.ClientOptions("a"));
    std::vector<float> g(DescribeModel("tiny")->parameter_count, 0.01f);
    for (uint64_t v = 0; v < 3; ++v) REQUIRE(client.Push(g.data(), g.size(), v, 1)->accepted);
  }
  ps.process->Signal(SIGTERM);
  REQUIRE(ps.process->Wait(absl::Seconds(30)) == 0);
  fs::remove(ps.dir + "/port");
  const auto before = TreeContents(ps.dir + "/ckpt");
  const std::string log = ps.dir + "/second.log";
  absl::StatusOr<Subprocess> again = Subprocess::Start(
      {CONVOY_PS_BINARY, "--model=tiny", "--bind=127.0.0.1", "--port=0",
       "--port_file=" + ps.dir + "/port", "--checkpoint_dir=" + ps.dir + "/ckpt", "--insecure"},
      log);
  REQUIRE(again.ok());
  CHECK(again->Wait(absl::Seconds(30)) == 2);
  const std::string out = ReadWholeFile(log);
  CHECK_THAT(out, Catch::Matchers::ContainsSubstring("ckpt-00000000000000000003") &&
                      Catch::Matchers::ContainsSubstring("--resume") &&
                      Catch::Matchers::ContainsSubstring("another directory"));
  CHECK(TreeContents(ps.dir + "/ckpt") == before);
  CHECK_FALSE(fs::exists(ps.dir + "/port"));
}

TEST_CASE("convoy_train with the name of a run that has checkpoints exits 2 and starts nothing",
          "[process][checkpoint]") {
  const std::string runs = MakeTempDir("convoy_train_runs");
  {
    ParameterServerOptions o;
    o.model = "compact";
    o.checkpoint_dir = runs + "/again/checkpoints";
    REQUIRE((*ParameterServer::Create(o))->Checkpoint().ok());
  }
  const auto before = TreeContents(runs);
  const std::string log = runs + "/../convoy_train_again.log";
  absl::StatusOr<Subprocess> train = Subprocess::Start(
      {CONVOY_TRAIN_BINARY, "--runs_dir=" + runs, "--name=again", "--minutes=0.2"}, log);
  REQUIRE(train.ok());
  CHECK(train->Wait(absl::Seconds(60)) == 2);
  const std::string out = ReadWholeFile(log);
  CHECK_THAT(out, Catch::Matchers::ContainsSubstring("--resume") &&
                      Catch::Matchers::ContainsSubstring("again") &&
                      Catch::Matchers::ContainsSubstring("ckpt-00000000000000000000"));
  CHECK(TreeContents(runs) == before);  // No convoy_ps, no credentials, no logs.
}

TEST_CASE("convoy_train resumes a run only with the parameter-server layout it was started with",
          "[process][checkpoint][shards]") {
  const std::string runs = MakeTempDir("convoy_train_layout");
  {
    // A run of one server, and a run of two shards, each with a checkpoint.
    ParameterServerOptions o;
    o.model = "compact";
    o.checkpoint_dir = runs + "/whole/checkpoints";
    REQUIRE((*ParameterServer::Create(o))->Checkpoint().ok());
    for (uint32_t i = 0; i < 2; ++i) {
      o.num_shards = 2;
      o.shard_index = i;
      o.checkpoint_dir = absl::StrCat(runs, "/sharded/checkpoints/shard-", i);
      REQUIRE((*ParameterServer::Create(o))->Checkpoint().ok());
    }
  }
  const auto before = TreeContents(runs);
  for (const auto& [name, shards, says] :
       {std::tuple{"whole", "--ps_shards=2", "a run with one server, not 2 shards"},
        std::tuple{"sharded", "--ps_shards=1", "a run with a sharded server, not 1 server"}}) {
    const std::string log = absl::StrCat(runs, "/../convoy_train_", name, ".log");
    absl::StatusOr<Subprocess> train =
        Subprocess::Start({CONVOY_TRAIN_BINARY, "--runs_dir=" + runs, absl::StrCat("--name=", name),
                           "--minutes=0.2", "--resume", shards},
                          log);
    REQUIRE(train.ok());
    CHECK(train->Wait(absl::Seconds(60)) == 2);
    CHECK_THAT(ReadWholeFile(log), Catch::Matchers::ContainsSubstring(says));
  }
  CHECK(TreeContents(runs) == before);  // Nothing started, nothing written.
}

TEST_CASE("convoy_status prints every shard and every agent, and names a server that does not answer",
          "[process][shards]") {
  std::vector<std::unique_ptr<testing::LoopbackServer>> shards;
  std::vector<std::string> addresses;
  for (uint32_t i = 0; i < 2; ++i) {
    ParameterServerOptions o;
    o.model = "tiny";
    o.num_shards = 2;
    o.shard_index = i;
    shards.push_back(std::make_unique<testing::LoopbackServer>(o));
    addresses.push_back(shards.back()->address);
  }
  // One push of agent "watched" to each shard, and a refused one to shard 1.
  for (uint32_t i = 0; i < 2; ++i) {
    agent::PsClientOptions o = shards[i]->ClientOptions("watched");
    o.hostname = "node-7";
    o.num_shards = 2;
    o.shard_index = i;
    o.shard_map_digest = shards[i]->server->core().shard_map().digest;
    agent::PsClient client(o);
    REQUIRE(client.Join().ok());
    const std::vector<float> g(shards[i]->server->core().model().parameter_count, 0.01f);
    REQUIRE(client.Push(g.data(), g.size(), 0, 1)->accepted);
    if (i == 1) REQUIRE(!client.Push(g.data(), g.size(), 5, 1)->accepted);  // Ahead: refused.
  }
  const std::string dir = MakeTempDir("convoy_status");
  absl::StatusOr<Subprocess> status = Subprocess::Start(
      {CONVOY_STATUS_BINARY, "--ps=" + addresses[0] + "," + addresses[1], "--insecure", "--watch",
       "--iterations=2", "--interval=200ms"},
      dir + "/status.out");
  REQUIRE(status.ok());
  REQUIRE(status->Wait(absl::Seconds(60)) == 0);
  const std::string out = ReadWholeFile(dir + "/status.out");
  INFO(out);
  CHECK_THAT(out, Catch::Matchers::ContainsSubstring("model tiny, 2 shards"));
  for (uint32_t i = 0; i < 2; ++i) {
    CHECK(std::regex_search(out, std::regex(absl::StrCat("\\n", i, " +", addresses[i], " +1 "))));
  }
  CHECK_THAT(out, Catch::Matchers::ContainsSubstring("AHEAD=1"));
  // The agent, merged over the shards: on its node, one push every shard accepted, one refused.
  CHECK(std::regex_search(out, std::regex("\\nwatched +node-7 +[0-9]+ s ago +0 +1 +1\\n")));
  CHECK(std::count(out.begin(), out.end(), '\n') > 12);  // Two tables.
  absl::StatusOr<Subprocess> away = Subprocess::Start(
      {CONVOY_STATUS_BINARY, "--ps=" + addresses[0] + ",127.0.0.1:1", "--insecure"},
      dir + "/away.out");
  REQUIRE(away.ok());
  CHECK(away->Wait(absl::Seconds(60)) == 1);
  CHECK_THAT(ReadWholeFile(dir + "/away.out"),
             Catch::Matchers::ContainsSubstring("127.0.0.1:1 does not answer"));
}

// The first line of `log` that matches `pattern`, its first group; "" while there is none.
std::string FirstMatch(const std::string& log, const std::regex& pattern) {
  const std::string out = ReadWholeFile(log);
  std::smatch match;
  return std::regex_search(out, match, pattern) ? match[1].str() : "";
}

TEST_CASE("convoy_status given only the run directory of a running convoy_train shows its shards "
          "and agents",
          "[process][status][shards]") {
  const std::string runs = MakeTempDir("convoy_train_watched");
  const std::string run = runs + "/run";
  const std::string log = runs + "/train.log";
  absl::StatusOr<Subprocess> train = Subprocess::Start(
      {CONVOY_TRAIN_BINARY, "--runs_dir=" + runs, "--name=run", "--agents=1", "--ps_shards=2",
       "--minutes=5", "--model=compact", "--device=cpu", "--validate_every_seconds=0",
       "--eval_episodes=1"},
      log);
  REQUIRE(train.ok());
  // Once its servers are up, convoy_train says how to watch the run, and where TensorBoard looks.
  std::string watched;
  const bool said = WaitUntil(
      [&] {
        watched = FirstMatch(log, std::regex("convoy_train: watch it live: \\./convoy status "
                                             "(\\S+) --watch\\n"));
        return !watched.empty();
      },
      absl::Seconds(120));
  INFO(ReadWholeFile(log));
  REQUIRE(said);
  CHECK(watched == run);
  CHECK_THAT(ReadWholeFile(log), Catch::Matchers::ContainsSubstring(
                                     "convoy_train: TensorBoard: tensorboard --logdir " + run));

  // That command (its table refreshed twice): both shards, and the agent once it has joined.
  std::string out;
  const bool shown = WaitUntil(
      [&] {
        const std::string status_log = runs + "/status.out";
        fs::remove(status_log);
        absl::StatusOr<Subprocess> status =
            Subprocess::Start({CONVOY_STATUS_BINARY, watched, "--watch", "--iterations=2",
                               "--interval=200ms"},
                              status_log);
        if (!status.ok() || status->Wait(absl::Seconds(60)) != 0) return false;
        out = ReadWholeFile(status_log);
        return absl::StrContains(out, "\nagent-0 ");
      },
      absl::Seconds(120));
  INFO(out);
  CHECK(shown);
  CHECK_THAT(out, Catch::Matchers::ContainsSubstring("model compact, 2 shards"));
  for (int i = 0; i < 2; ++i) {
    const std::string port = ReadWholeFile(absl::StrCat(run, "/ps-", i, ".port"));
    REQUIRE(!port.empty());
    CHECK(std::regex_search(
        out, std::regex(absl::StrCat("\\n", i, " +127\\.0\\.0\\.1:", std::stoi(port), " "))));
  }
  CHECK(std::count(out.begin(), out.end(), '\n') > 10);  // Two tables.

  // A flag given beside the run directory takes the place of what the directory holds.
  absl::StatusOr<Subprocess> elsewhere = Subprocess::Start(
      {CONVOY_STATUS_BINARY, run, "--ps=127.0.0.1:1"}, runs + "/elsewhere.out");
  REQUIRE(elsewhere.ok());
  CHECK(elsewhere->Wait(absl::Seconds(60)) == 1);
  CHECK_THAT(ReadWholeFile(runs + "/elsewhere.out"),
             Catch::Matchers::ContainsSubstring("127.0.0.1:1 does not answer"));

  train->Signal(SIGTERM);
  CHECK(train->Wait(absl::Seconds(120)) == 130);
  // The run has ended: its port files are left, and nothing answers at them.
  absl::StatusOr<Subprocess> ended =
      Subprocess::Start({CONVOY_STATUS_BINARY, run}, runs + "/ended.out");
  REQUIRE(ended.ok());
  CHECK(ended->Wait(absl::Seconds(60)) == 1);
  CHECK_THAT(ReadWholeFile(runs + "/ended.out"),
             Catch::Matchers::ContainsSubstring("does not answer") &&
                 Catch::Matchers::ContainsSubstring("(has the run in " + run + " ended?)"));
}

TEST_CASE("convoy_status given a directory without a run's files exits 2 naming the missing file",
          "[process][status]") {
  const std::string dir = MakeTempDir("convoy_status_run_dir");
  std::optional<int> code;
  std::string out;
  // Runs convoy_status with `args`: its exit code and what it said.
  auto status = [&](std::vector<std::string> args) {
    const std::string log = dir + "/status.out";
    fs::remove(log);
    args.insert(args.begin(), CONVOY_STATUS_BINARY);
    absl::StatusOr<Subprocess> started = Subprocess::Start(args, log);
    REQUIRE(started.ok());
    code = started->Wait(absl::Seconds(60));
    out = ReadWholeFile(log);
  };
  const std::string run = dir + "/run";
  status({run});
  CHECK(code == 2);
  CHECK_THAT(out, Catch::Matchers::ContainsSubstring("no run directory " + run));

  fs::create_directories(run);
  status({run, "--watch"});
  CHECK(code == 2);
  CHECK_THAT(out, Catch::Matchers::ContainsSubstring(run + "/ps.port is missing"));

  std::ofstream(run + "/ps.port") << "not a port\n";
  status({run});
  CHECK(code == 2);
  CHECK_THAT(out, Catch::Matchers::ContainsSubstring(run + "/ps.port holds no port"));

  std::ofstream(run + "/ps.port") << "50051\n";
  status({run});
  CHECK(code == 2);
  CHECK_THAT(out, Catch::Matchers::ContainsSubstring(run + "/tls/cert.pem is missing"));

  fs::create_directories(run + "/tls");
  std::ofstream(run + "/tls/cert.pem") << "a certificate\n";
  status({run});
  CHECK(code == 2);
  CHECK_THAT(out, Catch::Matchers::ContainsSubstring(run + "/tls/token is missing"));

  // Neither a run directory nor --ps; and two directories.
  status({});
  CHECK(code == 2);
  CHECK_THAT(out, Catch::Matchers::ContainsSubstring("give a run directory"));
  status({run, run});
  CHECK(code == 2);
  CHECK_THAT(out, Catch::Matchers::ContainsSubstring("one run directory at most"));
}

// A short convoy_train run (validations every few seconds on one episode) in dir/runs/run; returns
// its exit code, its output in dir/train.log.
std::optional<int> ShortValidatedRun(const std::string& dir) {
  absl::StatusOr<Subprocess> train = Subprocess::Start(
      {CONVOY_TRAIN_BINARY, "--runs_dir=" + dir + "/runs", "--name=run", "--agents=1",
       "--minutes=0.25", "--model=compact", "--device=cpu", "--max_epoch_runtime_sec=5",
       "--validate_every_seconds=4", "--validation_episodes=1", "--final_validation_episodes=0",
       "--eval_episodes=1", "--report_seconds=5"},
      dir + "/train.log");
  if (!train.ok()) return std::nullopt;
  return train->Wait(absl::Minutes(5));
}

// Whether Debian's python3 can import matplotlib.
bool MatplotlibImportable(const std::string& dir) {
  absl::StatusOr<Subprocess> python =
      Subprocess::Start({"/usr/bin/python3", "-c", "import matplotlib"}, dir + "/python.log");
  return python.ok() && python->Wait(absl::Seconds(60)) == 0;
}

TEST_CASE("A short convoy_train run leaves its learning curve in the run directory, drawn when "
          "matplotlib is there",
          "[process][learning_curve]") {
  const std::string dir = MakeTempDir("convoy_train_curve");
  const std::string run = dir + "/runs/run";
  const std::string csv = run + "/learning_curve.csv";
  const std::string png = run + "/learning_curve.png";

  SECTION("with matplotlib, the CSV of the validations and the random policy, and its picture") {
    const std::optional<int> code = ShortValidatedRun(dir);
    const std::string out = ReadWholeFile(dir + "/train.log");
    INFO(out);
    REQUIRE(code == 0);
    CHECK_THAT(out, Catch::Matchers::ContainsSubstring("convoy_train: watch it live: ./convoy "
                                                       "status " +
                                                       run + " --watch\n"));
    CHECK_THAT(out, Catch::Matchers::ContainsSubstring(
                        "convoy_train: TensorBoard: tensorboard --logdir " + run));
    // What TensorBoard reads there: each agent's event file.
    bool events = false;
    for (const fs::directory_entry& e : fs::directory_iterator(run + "/agent-0")) {
      events |= absl::StartsWith(e.path().filename().string(), "events.out.tfevents.");
    }
    CHECK(events);

    const std::string curve = ReadWholeFile(csv);
    INFO(curve);
    REQUIRE(absl::StartsWith(curve,
                             "series,minutes,env_steps,version,driving_score,driving_score_ci_low,"
                             "driving_score_ci_high,mean_return,full_episodes,episodes\n"));
    // A row per validation, minutes rising, each of one episode (its interval the point); then the
    // random policy's and the expert's on the same seed.
    const std::regex row(
        "\\nvalidation,([0-9.]+),[0-9]+,[0-9]+,([0-9.]+),([0-9.]+),([0-9.]+),[-0-9.]+,[01],1(?="
        "\\n)");
    std::vector<double> minutes;
    for (std::sregex_iterator it(curve.begin(), curve.end(), row), end; it != end; ++it) {
      minutes.push_back(std::stod((*it)[1]));
      const double score = std::stod((*it)[2]);
      CHECK(score >= 0);
      CHECK(score <= 1);
      CHECK(std::stod((*it)[3]) == score);
      CHECK(std::stod((*it)[4]) == score);
    }
    CHECK(minutes.size() >= 2);
    CHECK(std::is_sorted(minutes.begin(), minutes.end()));
    CHECK(std::regex_search(curve,
                            std::regex("\\nrandom,,,,[0-9.]+,[0-9.]+,[0-9.]+,[-0-9.]+,[01],1\\n"
                                       "expert,,,,[0-9.]+,[0-9.]+,[0-9.]+,[-0-9.]+,[01],1\\n$")));

    // The end of the run reaches the shared log whole and in order: the agents' time split, the
    // evaluation and its candidates, the map, then the baselines and the curve, each line by
    // itself.
    std::vector<size_t> at;
    for (const std::string& line : std::vector<std::string>
         {"\nwhere the agents' CPU-seconds went (", "\n| train step ", "\nRESULT cpu_share_train=",
          "\nconvoy_train: evaluating the greedy policy of ", "\nRESULT driving_score=",
          "\nthe candidates on the evaluation seeds (driving score, 95% CI):\n  the last weights ",
          "\nRESULT candidate_last_driving_score=",
          "\nmap of the greedy episodes: " + run + "/evaluation_map.png\n",
          "\non the 1 validation seeds, driving score: the random policy ", "\nlearning curve: "}) {
      INFO(line);
      at.push_back(out.find(line));
      CHECK(at.back() != std::string::npos);
    }
    CHECK(std::is_sorted(at.begin(), at.end()));
    // Once a minute at most, where the agents' CPU went: this run is shorter.
    CHECK_THAT(out, !Catch::Matchers::ContainsSubstring("agents' CPU: "));

    if (!MatplotlibImportable(dir)) {
      CHECK_THAT(out, Catch::Matchers::ContainsSubstring("not drawn (matplotlib is not installed"));
      CONVOY_SKIP("python3-matplotlib is not installed: the picture is not drawn");
    }
    CHECK_THAT(out, Catch::Matchers::ContainsSubstring("learning curve: " + png));
    CHECK(ReadWholeFile(png).substr(1, 3) == "PNG");
  }

  SECTION("without matplotlib, the run succeeds with the CSV and says in one line why there is no "
          "picture") {
    // A matplotlib package that fails to import, ahead of the real one on Python's path.
    const std::string shadow = dir + "/shadow";
    fs::create_directories(shadow + "/matplotlib");
    std::ofstream(shadow + "/matplotlib/__init__.py") << "raise ImportError('hidden by the test')\n";
    ::setenv("PYTHONPATH", shadow.c_str(), 1);
    const std::optional<int> code = ShortValidatedRun(dir);
    ::unsetenv("PYTHONPATH");
    const std::string out = ReadWholeFile(dir + "/train.log");
    INFO(out);
    CHECK(code == 0);
    CHECK_THAT(ReadWholeFile(csv), Catch::Matchers::ContainsSubstring("\nrandom,,,,"));
    CHECK_FALSE(fs::exists(png));
    CHECK(std::regex_search(
        out, std::regex("\\nlearning curve: " + csv +
                        "; not drawn \\(matplotlib is not installed; Debian: "
                        "python3-matplotlib\\), draw it with: /usr/bin/python3 [^\\n]*plot\\.py "
                        "[^\\n]*\\n")));
    CHECK_THAT(out, !Catch::Matchers::ContainsSubstring("plot.py: matplotlib"));
  }
}

// convoy_ps with the run settings of the issue's example, and a convoy_agent against it.
struct RunSettingsCluster {
  std::string dir = MakeTempDir("run_settings");
  std::optional<Subprocess> ps;
  int port = 0;

  void StartPs(std::vector<std::string> extra) {
    std::vector<std::string> argv = {CONVOY_PS_BINARY, "--bind=127.0.0.1", "--port=0",
                                     "--port_file=" + dir + "/port", "--insecure"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    absl::StatusOr<Subprocess> started = Subprocess::Start(argv, dir + "/ps.log");
    REQUIRE(started.ok());
    ps = *std::move(started);
    absl::StatusOr<std::string> line = WaitForFileLine(dir + "/port", absl::Seconds(60));
    INFO(ReadWholeFile(dir + "/ps.log"));
    REQUIRE(line.ok());
    port = std::stoi(*line);
  }
  std::optional<int> RunAgent(std::vector<std::string> extra, const std::string& log) {
    std::vector<std::string> argv = {CONVOY_AGENT_BINARY, absl::StrCat("--ps=127.0.0.1:", port),
                                     "--insecure", "--torch_threads=1"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    absl::StatusOr<Subprocess> agent = Subprocess::Start(argv, log);
    if (!agent.ok()) return std::nullopt;
    return agent->Wait(absl::Seconds(300));
  }
  v1::StatusResponse Status(const std::string& model) {
    agent::PsClientOptions o;
    o.address = absl::StrCat("127.0.0.1:", port);
    o.agent_id = "test";
    o.model_fingerprint = DescribeModel(model)->fingerprint;
    agent::PsClient client(o);
    absl::StatusOr<v1::StatusResponse> status = client.Status();
    REQUIRE(status.ok());
    return *status;
  }
};

TEST_CASE("An agent adopts the server's run settings and refuses a flag that disagrees",
          "[process][run_config]") {
  RunSettingsCluster cluster;
  // 1-step returns, so each step is a transition to sample at once (with 3, the default, a step
  // waits for the two after it, and learning starts a little later).
  cluster.StartPs({"--model=compact", "--batch_size=64", "--batch_update_frequency=8",
                   "--gamma=0.9", "--n_step=1"});
  // Without those flags. 16 sampled transitions per step in minibatches of 64 from the 200th step on: 600
  // steps train 100 minibatches, pushed as 12 of 8 and, at the end, the last 4.
  const std::string log = cluster.dir + "/agent.log";
  REQUIRE(cluster.RunAgent({"--max_steps=600", "--min_replay_size=200", "--replay_ratio=16"}, log) == 0);
  const std::string out = ReadWholeFile(log);
  INFO(out);
  CHECK_THAT(out, Catch::Matchers::ContainsSubstring("batch_size=64") &&
                      Catch::Matchers::ContainsSubstring("batch_update_frequency=8") &&
                      Catch::Matchers::ContainsSubstring("gamma=0.9"));
  const v1::StatusResponse status = cluster.Status("compact");
  CHECK(status.applied_minibatches() == 100);
  CHECK(status.updates_applied() == 13);

  const std::string refused_log = cluster.dir + "/refused.log";
  CHECK(cluster.RunAgent({"--max_steps=10", "--batch_size=16"}, refused_log) == 2);
  const std::string refused = ReadWholeFile(refused_log);
  CHECK_THAT(refused, Catch::Matchers::ContainsSubstring("--batch_size=16") &&
                          Catch::Matchers::ContainsSubstring("64") &&
                          Catch::Matchers::ContainsSubstring("convoy_ps with --batch_size=16"));
  // Agreeing explicitly is fine.
  CHECK(cluster.RunAgent({"--max_steps=10", "--batch_size=64"}, cluster.dir + "/agree.log") == 0);
  cluster.ps->Signal(SIGTERM);
  CHECK(cluster.ps->Wait(absl::Seconds(30)) == 0);
}

TEST_CASE("convoy_ps and convoy_agent started with their defaults work together",
          "[process][run_config]") {
  RunSettingsCluster cluster;
  cluster.StartPs({});
  // The defaults but for the bound: 1000 random steps fill the replay, 200 more train 50 minibatches.
  const std::string log = cluster.dir + "/agent.log";
  REQUIRE(cluster.RunAgent({"--max_steps=1200"}, log) == 0);
  const v1::StatusResponse status = cluster.Status(run_defaults::kServerModel);
  INFO(ReadWholeFile(log));
  CHECK(status.model_name() == run_defaults::kServerModel);
  CHECK(status.updates_applied() >= 1);
  CHECK(status.rejections().empty());
  cluster.ps->Signal(SIGTERM);
  CHECK(cluster.ps->Wait(absl::Seconds(30)) == 0);
}

}  // namespace
}  // namespace convoy::ps
