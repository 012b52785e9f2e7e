#include "param_server/core/checkpointer.h"

#include <filesystem>
#include <fstream>
#include <map>

#include "common/settings/exploration.h"
#include "param_server/core/apply_counters.h"
#include "param_server/core/parameter_server.h"
#include "tests/catch.h"
#include "tests/support/subprocess.h"

namespace convoy::ps {
namespace {

namespace fs = std::filesystem;
using testing::MakeTempDir;

ParameterServerOptions TinyOptions(const std::string& dir) {
  ParameterServerOptions o;
  o.model = "tiny";
  o.checkpoint_dir = dir;
  o.keep_checkpoints = 3;
  o.target_update_frequency = 2;
  return o;
}

// Applies `n` pushes of a fixed gradient, as agent "a".
void PushN(ParameterServer& server, int n) {
  for (int i = 0; i < n; ++i) {
    std::vector<float> g(server.model().parameter_count, 0.01f * (i + 1));
    server.Apply("a", server.version(), 1, g);
  }
}

std::vector<std::string> CheckpointDirs(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// A new directory holding one run's checkpoints of versions 1, 2 and 3.
std::string DirWithThreeCheckpoints() {
  const std::string dir = MakeTempDir("ckpt");
  auto server = *ParameterServer::Create(TinyOptions(dir));
  for (int i = 0; i < 3; ++i) {
    PushN(*server, 1);
    REQUIRE(server->Checkpoint().ok());
  }
  return dir;
}

void FlipByte(const std::string& path, size_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset));
  char c;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x5a);
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(&c, 1);
}

TEST_CASE("A checkpoint restores weights, target, optimizer state and counters", "[checkpoint]") {
  const std::string dir = MakeTempDir("ckpt");
  std::vector<float> expected_weights, expected_target;
  {
    auto server = *ParameterServer::Create(TinyOptions(dir));
    PushN(*server, 5);
    server->CountRejection("a", v1::REJECT_REASON_NON_FINITE);
    REQUIRE(server->Checkpoint().ok());
    expected_weights = server->Snapshot(v1::NETWORK_ONLINE)->values;
    expected_target = server->Snapshot(v1::NETWORK_TARGET)->values;
    // One more step from the checkpointed state, to compare with the resumed server's.
    PushN(*server, 1);
  }
  ParameterServerOptions resume = TinyOptions(dir);
  resume.resume = true;
  auto resumed = *ParameterServer::Create(resume);
  CHECK(resumed->version() == 5);
  CHECK(resumed->Snapshot(v1::NETWORK_ONLINE)->values == expected_weights);
  CHECK(resumed->Snapshot(v1::NETWORK_TARGET)->values == expected_target);
  CHECK(resumed->Snapshot(v1::NETWORK_TARGET)->version == 4);  // Every 2 minibatches: at 2, then 4.
  const v1::StatusResponse status = resumed->Status();
  CHECK(status.updates_applied() == 5);
  CHECK(status.applied_minibatches() == 5);
  CHECK(status.rejections().at("REJECT_REASON_NON_FINITE") == 1);
  CHECK(status.epsilon() == Approx(1.0 - 5 * 0.003));
}

TEST_CASE(
    "The training clock is checkpointed, and a resumed start's fall over minutes ends after it",
    "[checkpoint][learning_rate]") {
  const std::string dir = MakeTempDir("ckpt");
  ParameterServerOptions o = TinyOptions(dir);
  o.learning_rate_decay_minutes = 0.005;  // 300 ms.
  o.final_learning_rate_scale = 0.25;
  double trained = 0;
  {
    auto server = *ParameterServer::Create(o);
    PushN(*server, 1);
    absl::SleepFor(absl::Milliseconds(400));
    PushN(*server, 1);
    const v1::StatusResponse status = server->Status();
    trained = status.training_seconds();
    REQUIRE(trained >= 0.4);
    CHECK(status.learning_rate_scale() == 0.25);  // The first start's fall is over.
    REQUIRE(server->Checkpoint().ok());
  }
  o.resume = true;
  auto resumed = *ParameterServer::Create(o);
  const v1::StatusResponse status = resumed->Status();
  // Milliseconds in the manifest.
  CHECK(status.training_seconds() == Approx(trained).margin(1e-3));
  // This start's fall ends 300 ms after the clock's reading at the start.
  CHECK(status.learning_rate_scale() ==
        Approx(CosineScale(trained / (trained + 0.3), 0.25)).margin(1e-3));
  CHECK(status.learning_rate_scale() > 0.25);
}

TEST_CASE("The training clock counts the gaps between applied steps up to a cap", "[checkpoint]") {
  ApplyCounters counters(absl::Seconds(10), absl::UnixEpoch());
  absl::Mutex mu;
  absl::MutexLock lock(&mu);
  AppliedStep step;
  step.minibatches = 1;
  for (int seconds : {100, 101, 103, 200, 201}) {  // A pause of 97 s counts as the cap.
    step.at = absl::UnixEpoch() + absl::Seconds(seconds);
    counters.Applied(mu, step);
  }
  CHECK(counters.training_time() == absl::Seconds(1 + 2 + 1) + ApplyCounters::kTrainingClockGap);
  CheckpointData data;
  REQUIRE(counters.SaveTo(mu, data).ok());
  CHECK(data.manifest.training_ms() == absl::ToInt64Milliseconds(counters.training_time()));
  // A restored clock goes on from the checkpoint's, and the first step after it adds no gap.
  ApplyCounters restored(absl::Seconds(10), absl::UnixEpoch());
  LoadedCheckpoint loaded;
  loaded.manifest = data.manifest;
  REQUIRE(restored.Restore(mu, loaded).ok());
  step.at = absl::UnixEpoch() + absl::Seconds(5000);
  restored.Applied(mu, step);
  CHECK(restored.training_time() == counters.training_time());
}

TEST_CASE("A resumed server continues the same version and weight sequence", "[checkpoint]") {
  const std::string dir_a = MakeTempDir("ckpt"), dir_b = MakeTempDir("ckpt");
  auto straight = *ParameterServer::Create(TinyOptions(dir_a));
  PushN(*straight, 3);
  {
    auto first = *ParameterServer::Create(TinyOptions(dir_b));
    PushN(*first, 3);
    REQUIRE(first->Checkpoint().ok());
  }
  ParameterServerOptions resume = TinyOptions(dir_b);
  resume.resume = true;
  auto second = *ParameterServer::Create(resume);
  // Same next gradient on both: Adam's moments came back, so the results agree exactly.
  std::vector<float> g1(straight->model().parameter_count, -0.02f), g2 = g1;
  straight->Apply("a", 3, 1, g1);
  second->Apply("a", 3, 1, g2);
  CHECK(second->version() == 4);
  CHECK(second->Snapshot(v1::NETWORK_ONLINE)->values ==
        straight->Snapshot(v1::NETWORK_ONLINE)->values);
}

TEST_CASE("A checkpoint keeps the averaged network, and a resumed server continues it",
          "[checkpoint][average]") {
  const std::string dir_a = MakeTempDir("ckpt"), dir_b = MakeTempDir("ckpt");
  ParameterServerOptions options = TinyOptions(dir_b);
  options.average_horizon = 3;
  ParameterServerOptions straight_options = options;
  straight_options.checkpoint_dir = dir_a;
  auto straight = *ParameterServer::Create(straight_options);
  for (int i = 0; i < 4; ++i) {
    PushN(*straight, 1);
    straight->FoldAverage();
  }
  std::string path;
  {
    auto first = *ParameterServer::Create(options);
    for (int i = 0; i < 4; ++i) {
      PushN(*first, 1);
      first->FoldAverage();
    }
    absl::StatusOr<std::string> written = first->Checkpoint();
    REQUIRE(written.ok());
    path = *written;
    CHECK(first->Snapshot(v1::NETWORK_AVERAGE)->values ==
          straight->Snapshot(v1::NETWORK_AVERAGE)->values);
  }
  CHECK(fs::exists(path + "/average.pt"));
  ParameterServerOptions resume = options;
  resume.resume = true;
  auto second = *ParameterServer::Create(resume);
  CHECK(second->Snapshot(v1::NETWORK_AVERAGE)->values ==
        straight->Snapshot(v1::NETWORK_AVERAGE)->values);
  CHECK(second->Snapshot(v1::NETWORK_AVERAGE)->version == 4);
  // Past its horizon of 3 minibatches: the next fold weighs the new weights by 1 - (2/3)^1 on both.
  std::vector<float> g1(straight->model().parameter_count, -0.02f), g2 = g1;
  straight->Apply("a", 4, 1, g1);
  second->Apply("a", 4, 1, g2);
  REQUIRE(straight->FoldAverage());
  REQUIRE(second->FoldAverage());
  CHECK(second->Snapshot(v1::NETWORK_AVERAGE)->values ==
        straight->Snapshot(v1::NETWORK_AVERAGE)->values);

  // A checkpoint written without averaging: the resumed average starts from its weights.
  const std::string dir_c = MakeTempDir("ckpt");
  {
    ParameterServerOptions off = TinyOptions(dir_c);
    off.average_horizon = 0;
    auto server = *ParameterServer::Create(off);
    PushN(*server, 2);
    REQUIRE(server->Checkpoint().ok());
  }
  ParameterServerOptions on = TinyOptions(dir_c);
  on.resume = true;
  on.average_horizon = 3;
  auto resumed = *ParameterServer::Create(on);
  CHECK(resumed->Snapshot(v1::NETWORK_AVERAGE)->values ==
        resumed->Snapshot(v1::NETWORK_ONLINE)->values);
}

TEST_CASE("Only the newest keep_checkpoints are kept", "[checkpoint]") {
  const std::string dir = MakeTempDir("ckpt");
  auto server = *ParameterServer::Create(TinyOptions(dir));
  for (int i = 0; i < 5; ++i) {
    PushN(*server, 1);
    REQUIRE(server->Checkpoint().ok());
  }
  CHECK(CheckpointDirs(dir) == std::vector<std::string>{"ckpt-00000000000000000003",
                                                        "ckpt-00000000000000000004",
                                                        "ckpt-00000000000000000005"});
}

TEST_CASE("Corrupt, truncated and torn checkpoints are skipped for the newest valid one",
          "[checkpoint]") {
  const std::string dir = DirWithThreeCheckpoints();
  const std::string v3 = dir + "/ckpt-00000000000000000003";
  const std::string v2 = dir + "/ckpt-00000000000000000002";
  ParameterServerOptions resume = TinyOptions(dir);
  resume.resume = true;

  SECTION("a flipped byte fails the checksum") {
    FlipByte(v3 + "/weights.pt", 100);
    CHECK(Checkpointer::VerifyManifest(v3).status().code() == absl::StatusCode::kDataLoss);
    CHECK_THAT(std::string(Checkpointer::VerifyManifest(v3).status().message()),
               Catch::Matchers::ContainsSubstring("SHA-256"));
    CHECK((*ParameterServer::Create(resume))->version() == 2);
  }
  SECTION("a truncated file fails its size") {
    fs::resize_file(v3 + "/optimizer.pt", 10);
    CHECK_THAT(std::string(Checkpointer::VerifyManifest(v3).status().message()),
               Catch::Matchers::ContainsSubstring("truncated"));
    CHECK((*ParameterServer::Create(resume))->version() == 2);
  }
  SECTION("a directory without a manifest is torn") {
    fs::remove(v3 + "/MANIFEST");
    CHECK((*ParameterServer::Create(resume))->version() == 2);
  }
  SECTION("a garbled manifest is refused") {
    std::ofstream(v3 + "/MANIFEST") << "version: banana";
    CHECK(Checkpointer::VerifyManifest(v3).status().code() == absl::StatusCode::kDataLoss);
    CHECK((*ParameterServer::Create(resume))->version() == 2);
  }
  SECTION("with every checkpoint bad, the server starts fresh") {
    for (const std::string& d : {v3, v2, dir + "/ckpt-00000000000000000001"}) {
      fs::remove(d + "/MANIFEST");
    }
    CHECK((*ParameterServer::Create(resume))->version() == 0);
  }
}

TEST_CASE("The newest checkpoint is chosen by manifest version, not by file time", "[checkpoint]") {
  const std::string dir = MakeTempDir("ckpt");
  {
    auto server = *ParameterServer::Create(TinyOptions(dir));
    PushN(*server, 1);
    REQUIRE(server->Checkpoint().ok());
    PushN(*server, 1);
    REQUIRE(server->Checkpoint().ok());
  }
  // Make the older checkpoint look newer on disk.
  fs::last_write_time(dir + "/ckpt-00000000000000000001",
                      fs::file_time_type::clock::now() + std::chrono::hours(1));
  ParameterServerOptions resume = TinyOptions(dir);
  resume.resume = true;
  CHECK((*ParameterServer::Create(resume))->version() == 2);
}

TEST_CASE("A checkpoint of another model is refused, naming both fingerprints", "[checkpoint]") {
  const std::string dir = MakeTempDir("ckpt");
  {
    auto server = *ParameterServer::Create(TinyOptions(dir));
    PushN(*server, 1);
    REQUIRE(server->Checkpoint().ok());
  }
  ParameterServerOptions other = TinyOptions(dir);
  other.model = "tiny_dueling";
  other.resume = true;
  absl::StatusOr<std::unique_ptr<ParameterServer>> server = ParameterServer::Create(other);
  REQUIRE(server.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(server.status().message()),
             Catch::Matchers::ContainsSubstring(DescribeModel("tiny")->fingerprint) &&
                 Catch::Matchers::ContainsSubstring(DescribeModel("tiny_dueling")->fingerprint));
}

TEST_CASE("Flag init_checkpoint seeds the weights at version 0", "[checkpoint]") {
  const std::string dir = MakeTempDir("ckpt");
  std::vector<float> weights;
  std::string path;
  {
    auto server = *ParameterServer::Create(TinyOptions(dir));
    PushN(*server, 4);
    path = *server->Checkpoint();
    weights = server->Snapshot(v1::NETWORK_ONLINE)->values;
  }
  ParameterServerOptions init;
  init.model = "tiny";
  init.init_checkpoint = path;
  auto server = *ParameterServer::Create(init);
  CHECK(server->version() == 0);
  CHECK(server->Snapshot(v1::NETWORK_ONLINE)->values == weights);
  init.init_checkpoint = dir + "/nope";  // Neither a checkpoint nor a directory of them.
  const absl::Status missing = ParameterServer::Create(init).status();
  CHECK(missing.code() == absl::StatusCode::kNotFound);
  CHECK_THAT(std::string(missing.message()),
             Catch::Matchers::ContainsSubstring(dir + "/nope holds no checkpoint"));
  init.init_checkpoint = dir;  // A run's checkpoint directory: its newest.
  CHECK(ParameterServer::Create(init).value()->Snapshot(v1::NETWORK_ONLINE)->values == weights);
}

TEST_CASE("A checkpoint directory that cannot be written fails the write, not the server",
          "[checkpoint]") {
  const std::string dir = MakeTempDir("ckpt");
  auto server = *ParameterServer::Create(TinyOptions(dir));
  PushN(*server, 1);
  REQUIRE(server->Checkpoint().ok());
  // Put a plain file where the directory was (permissions would not stop root).
  fs::rename(dir, dir + ".away");
  std::ofstream(dir) << "not a directory";
  PushN(*server, 1);
  absl::StatusOr<std::string> failed = server->Checkpoint();
  CHECK_FALSE(failed.ok());
  CHECK_THAT(std::string(failed.status().message()), Catch::Matchers::ContainsSubstring(dir));
  CHECK(server->Status().checkpoint_failures() == 1);
  fs::remove(dir);
  fs::rename(dir + ".away", dir);
  CHECK(Checkpointer::VerifyManifest(dir + "/ckpt-00000000000000000001").ok());
  PushN(*server, 1);  // Training goes on, and so do checkpoints.
  CHECK(server->version() == 3);
  CHECK(server->Checkpoint().ok());
}

// Every file under `dir` with its bytes, to show that a refused start changed nothing.
std::map<std::string, std::string> Contents(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) files[e.path().string()] = testing::ReadWholeFile(e.path().string());
  }
  return files;
}

TEST_CASE("A new run in a directory holding checkpoints is refused and touches nothing",
          "[checkpoint][run]") {
  const std::string dir = MakeTempDir("ckpt");
  std::string run;
  {
    auto server = *ParameterServer::Create(TinyOptions(dir));
    run = server->run_id();
    PushN(*server, 2);
    REQUIRE(server->Checkpoint().ok());
  }
  const auto before = Contents(dir);
  absl::StatusOr<std::unique_ptr<ParameterServer>> again =
      ParameterServer::Create(TinyOptions(dir));
  REQUIRE(again.status().code() == absl::StatusCode::kFailedPrecondition);
  const std::string message(again.status().message());
  CHECK_THAT(message, Catch::Matchers::ContainsSubstring("ckpt-00000000000000000002") &&
                          Catch::Matchers::ContainsSubstring(run) &&
                          Catch::Matchers::ContainsSubstring("--resume") &&
                          Catch::Matchers::ContainsSubstring("another directory"));
  CHECK(Contents(dir) == before);
  // A directory without checkpoints (missing, empty, or only names that are not checkpoints) is
  // free.
  CHECK(Checkpointer::CheckUnused(dir + "/missing").ok());
  const std::string junk = MakeTempDir("ckpt");
  fs::create_directory(junk + "/ckpt-x");
  std::ofstream(junk + "/notes.txt") << "mine";
  CHECK(Checkpointer::CheckUnused(junk).ok());
}

TEST_CASE("A resumed run keeps its run id and prunes only its own checkpoints",
          "[checkpoint][run]") {
  const std::string dir = MakeTempDir("ckpt");
  const ModelInfo tiny = *DescribeModel("tiny");
  // Another run's checkpoints at versions 1-3, written into the same directory.
  auto other = *ParameterServer::Create(TinyOptions(MakeTempDir("ckpt")));
  Checkpointer foreign(dir, 3, tiny, "run-of-someone-else");
  for (int v = 1; v <= 3; ++v) {
    PushN(*other, 1);
    CheckpointData data;
    data.manifest.set_version(v);
    data.manifest.set_model_fingerprint(tiny.fingerprint);
    data.weights = other->Snapshot(v1::NETWORK_ONLINE);
    data.target = other->Snapshot(v1::NETWORK_TARGET);
    REQUIRE(foreign.Write(data).ok());
  }
  // This run's writer: another run's version is never reported as written, nor overwritten.
  Checkpointer mine(dir, 2, tiny);
  CheckpointData data;
  data.manifest.set_version(2);
  data.manifest.set_model_fingerprint(tiny.fingerprint);
  data.weights = other->Snapshot(v1::NETWORK_ONLINE);
  data.target = other->Snapshot(v1::NETWORK_TARGET);
  absl::StatusOr<std::string> taken = mine.Write(data);
  REQUIRE(taken.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(taken.status().message()),
             Catch::Matchers::ContainsSubstring("run-of-someone-else"));
  CHECK(Checkpointer::VerifyManifest(dir + "/ckpt-00000000000000000002")->run_id() ==
        "run-of-someone-else");
  // Its own checkpoints are kept to 2; the other run's three stay.
  for (int v = 10; v <= 13; ++v) {
    data.manifest.set_version(v);
    REQUIRE(mine.Write(data).ok());
  }
  CHECK(CheckpointDirs(dir) ==
        std::vector<std::string>{"ckpt-00000000000000000001", "ckpt-00000000000000000002",
                                 "ckpt-00000000000000000003", "ckpt-00000000000000000012",
                                 "ckpt-00000000000000000013"});

  // A server resuming there continues the newest checkpoint's run, under the same id.
  const std::string run_dir = MakeTempDir("ckpt");
  std::string run;
  {
    auto first = *ParameterServer::Create(TinyOptions(run_dir));
    run = first->run_id();
    PushN(*first, 1);
    REQUIRE(first->Checkpoint().ok());
  }
  ParameterServerOptions resume = TinyOptions(run_dir);
  resume.resume = true;
  auto resumed = *ParameterServer::Create(resume);
  CHECK(resumed->run_id() == run);
  CHECK(resumed->Status().run_id() == run);
  PushN(*resumed, 1);
  const std::string path = *resumed->Checkpoint();
  CHECK(Checkpointer::VerifyManifest(path)->run_id() == run);
}

TEST_CASE("A checkpoint of an unchanged version is neither written nor counted again",
          "[checkpoint][run]") {
  const std::string dir = MakeTempDir("ckpt");
  auto server = *ParameterServer::Create(TinyOptions(dir));
  PushN(*server, 1);
  const std::string first = *server->Checkpoint();
  const std::string again = *server->Checkpoint();
  CHECK(again == first);
  CHECK(server->Status().checkpoints_written() == 1);
}

TEST_CASE("A torn checkpoint of this run's version is replaced, not taken as written",
          "[checkpoint][run]") {
  const std::string dir = DirWithThreeCheckpoints();
  const std::string v3 = dir + "/ckpt-00000000000000000003";
  FlipByte(v3 + "/weights.pt", 100);
  ParameterServerOptions resume = TinyOptions(dir);
  resume.resume = true;
  auto server = *ParameterServer::Create(resume);
  REQUIRE(server->version() == 2);
  PushN(*server, 1);
  REQUIRE(server->Checkpoint().ok());
  CHECK(Checkpointer::VerifyManifest(v3).ok());
  CHECK(server->Status().checkpoints_written() == 1);
}

TEST_CASE("Names in the directory that are not checkpoints are skipped, never a crash",
          "[checkpoint][run]") {
  const std::string dir = MakeTempDir("ckpt");
  {
    auto server = *ParameterServer::Create(TinyOptions(dir));
    PushN(*server, 1);
    REQUIRE(server->Checkpoint().ok());
  }
  fs::create_directory(dir + "/ckpt-x");
  fs::create_directory(dir + "/ckpt-" + std::string(30, '9'));  // Past 64 bits.
  fs::create_directory(dir + "/ckpt-");
  std::ofstream(dir + "/ckpt-00000000000000000009") << "a file, not a checkpoint";
  ParameterServerOptions resume = TinyOptions(dir);
  resume.resume = true;
  absl::StatusOr<std::unique_ptr<ParameterServer>> server = ParameterServer::Create(resume);
  REQUIRE(server.ok());
  CHECK((*server)->version() == 1);
  for (int i = 0; i < 4; ++i) {  // Writes and prunes around them.
    PushN(**server, 1);
    REQUIRE((*server)->Checkpoint().ok());
  }
  CHECK(fs::exists(dir + "/ckpt-x"));
  CHECK(fs::exists(dir + "/ckpt-00000000000000000009"));
}

}  // namespace
}  // namespace convoy::ps
