// Every numeric flag of every binary is range-checked at start: a value out of range exits 2 with
// a message naming the flag and its range, before any file, directory or socket is made.
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/catch.h"
#include "tests/support/subprocess.h"

namespace convoy::deploy {
namespace {

namespace fs = std::filesystem;
using testing::MakeTempDir;
using testing::ReadWholeFile;
using testing::Subprocess;

enum class Binary { kPs, kAgent, kTrain, kSyntheticAgent, kEval, kSim, kBenchPs, kBenchSim };

struct BadValue {
  Binary binary;
  std::string flag;     // "--agents=0"
  std::string message;  // What stderr must hold: "--agents must be in [1, 256], got 0".
};

// What each binary would make in `dir` were it to start: its files all go under `dir`, so the
// check that `dir` stays empty sees any of them.
std::vector<std::string> Argv(Binary binary, const std::string& dir) {
  switch (binary) {
    case Binary::kPs:
      return {CONVOY_PS_BINARY,
              "--port=0",
              "--bind=127.0.0.1",
              "--insecure",
              "--model=tiny",
              "--port_file=" + dir + "/ps.port",
              "--checkpoint_dir=" + dir + "/checkpoints"};
    case Binary::kAgent:
      return {CONVOY_AGENT_BINARY, "--model=tiny", "--max_steps=1", "--log_dir=" + dir + "/logs"};
    case Binary::kTrain:
      return {CONVOY_TRAIN_BINARY, "--runs_dir=" + dir + "/runs", "--minutes=0.05", "--agents=1"};
    case Binary::kSyntheticAgent:
      return {CONVOY_SYNTHETIC_AGENT_BINARY, "--ps=127.0.0.1:1", "--insecure", "--seconds=0"};
    case Binary::kEval:
      return {CONVOY_EVAL_BINARY, "--checkpoint=" + dir + "/none", "--map_png=" + dir + "/m.png"};
    case Binary::kSim:
      return {CONVOY_SIM_BINARY, "--port=0", "--dump_frames=" + dir + "/frames"};
    case Binary::kBenchPs:
      return {CONVOY_BENCH_PS_BINARY, "--model=tiny", "--clients=1", "--encodings=fp32"};
    case Binary::kBenchSim:
      return {CONVOY_BENCH_SIM_BINARY, "--loopback=false", "--dump_frames=" + dir + "/frames"};
  }
  return {};
}

const std::vector<BadValue>& BadValues() {
  static const std::vector<BadValue> cases = {
      // convoy_ps: one bad value for each numeric flag that has any.
      {Binary::kPs, "--port=65536", "--port must be in [0, 65535], got 65536"},
      {Binary::kPs, "--port=-1", "--port must be in [0, 65535], got -1"},
      {Binary::kPs, "--num_actions=0", "--num_actions must be in [1, 4096], got 0"},
      {Binary::kPs, "--keep_checkpoints=0", "--keep_checkpoints must be in [1, 100000], got 0"},
      {Binary::kPs, "--checkpoint_every_seconds=-1",
       "--checkpoint_every_seconds must be in [0, inf), got -1"},
      {Binary::kPs, "--learning_rate=0", "--learning_rate must be in (0, inf), got 0"},
      {Binary::kPs, "--learning_rate=nan", "--learning_rate must be in (0, inf), got nan"},
      {Binary::kPs, "--beta1=1", "--beta1 must be in [0, 1), got 1"},
      {Binary::kPs, "--beta2=-0.1", "--beta2 must be in [0, 1), got -0.1"},
      {Binary::kPs, "--eps=0", "--eps must be in (0, 1], got 0"},
      {Binary::kPs, "--weight_decay=2", "--weight_decay must be in [0, 1], got 2"},
      {Binary::kPs, "--momentum=1", "--momentum must be in [0, 1), got 1"},
      {Binary::kPs, "--rmsprop_alpha=1.5", "--rmsprop_alpha must be in [0, 1), got 1.5"},
      {Binary::kPs, "--max_grad_norm=-1", "--max_grad_norm must be in [0, inf), got -1"},
      {Binary::kPs, "--max_staleness=-2", "--max_staleness must be in [-1, inf), got -2"},
      {Binary::kPs, "--target_update_frequency=0",
       "--target_update_frequency must be in [1, inf), got 0"},
      {Binary::kPs, "--target_update_tau=0", "--target_update_tau must be in (0, 1], got 0"},
      {Binary::kPs, "--average_every_seconds=0",
       "--average_every_seconds must be in (0, inf), got 0"},
      {Binary::kPs, "--start_epsilon=1.5", "--start_epsilon must be in [0, 1], got 1.5"},
      {Binary::kPs, "--min_epsilon=-0.5", "--min_epsilon must be in [0, 1], got -0.5"},
      {Binary::kPs, "--per_iter_epsilon_reduction=2",
       "--per_iter_epsilon_reduction must be in [0, 1], got 2"},
      {Binary::kPs, "--apex_base_epsilon=1.1", "--apex_base_epsilon must be in [0, 1], got 1.1"},
      {Binary::kPs, "--apex_alpha=-1", "--apex_alpha must be in [0, 100], got -1"},
      {Binary::kPs, "--apex_num_agents=0", "--apex_num_agents must be in [1, 65536], got 0"},
      {Binary::kPs, "--batch_size=0", "--batch_size must be in [1, 65536], got 0"},
      // One type per setting on every binary: a negative value reads as out of range here too.
      {Binary::kPs, "--batch_size=-1", "--batch_size must be in [1, 65536], got -1"},
      {Binary::kPs, "--batch_update_frequency=0",
       "--batch_update_frequency must be in [1, 65536], got 0"},
      {Binary::kPs, "--gamma=1.01", "--gamma must be in [0, 1], got 1.01"},
      {Binary::kPs, "--n_step=0", "--n_step must be in [1, 100], got 0"},
      {Binary::kPs, "--learner_max_grad_norm=-1",
       "--learner_max_grad_norm must be in [0, inf), got -1"},
      {Binary::kPs, "--shutdown_grace_seconds=-1",
       "--shutdown_grace_seconds must be in [0, inf), got -1"},
      {Binary::kPs, "--credentials_days=0", "--credentials_days must be in [1, 36500], got 0"},
      {Binary::kPs, "--stream_idle_timeout_seconds=-1",
       "--stream_idle_timeout_seconds must be in [0, inf), got -1"},
      {Binary::kPs, "--fault_lose_replies=1.5", "--fault_lose_replies must be in [0, 1], got 1.5"},
      {Binary::kPs, "--num_shards=0", "--num_shards must be in [1, 65536], got 0"},
      {Binary::kPs, "--shard_index=3", "--shard_index must be in [0, 0], got 3"},
      // convoy_agent.
      {Binary::kAgent, "--scenario=rush_hour",
       "--scenario: unknown scenario 'rush_hour'; known: traffic, parked, empty"},
      {Binary::kAgent, "--agent_index=70000", "--agent_index must be in [0, 65535], got 70000"},
      {Binary::kAgent, "--torch_threads=-1", "--torch_threads must be in [0, 1024], got -1"},
      {Binary::kAgent, "--batch_size=0", "--batch_size must be in [1, 65536], got 0"},
      {Binary::kAgent, "--batch_update_frequency=0",
       "--batch_update_frequency must be in [1, 65536], got 0"},
      {Binary::kAgent, "--replay_memory_size=0", "--replay_memory_size must be in [1, inf), got 0"},
      {Binary::kAgent, "--min_replay_size=0", "--min_replay_size must be in [1, inf), got 0"},
      {Binary::kAgent, "--replay_ratio=0", "--replay_ratio must be in (0, inf), got 0"},
      {Binary::kAgent, "--prefetch_batches=0", "--prefetch_batches must be in [1, 64], got 0"},
      {Binary::kAgent, "--n_step=0", "--n_step must be in [1, 100], got 0"},
      {Binary::kAgent, "--gamma=-0.1", "--gamma must be in [0, 1], got -0.1"},
      {Binary::kAgent, "--learning_rate=-1", "--learning_rate must be in (0, inf), got -1"},
      {Binary::kAgent, "--learner_max_grad_norm=-1",
       "--learner_max_grad_norm must be in [0, inf), got -1"},
      {Binary::kAgent, "--target_update_frequency=0",
       "--target_update_frequency must be in [1, inf), got 0"},
      {Binary::kAgent, "--min_epsilon=2", "--min_epsilon must be in [0, 1], got 2"},
      {Binary::kAgent, "--per_iter_epsilon_reduction=-1",
       "--per_iter_epsilon_reduction must be in [0, 1], got -1"},
      {Binary::kAgent, "--max_epoch_runtime_sec=0",
       "--max_epoch_runtime_sec must be in (0, inf), got 0"},
      {Binary::kAgent, "--max_minutes=-1", "--max_minutes must be in [0, inf), got -1"},
      {Binary::kAgent, "--report_seconds=0", "--report_seconds must be in (0, inf), got 0"},
      {Binary::kAgent, "--sync_wait=-1s", "--sync_wait must be in [0, inf), got -1s"},
      {Binary::kAgent, "--final_sync_for=-1s", "--final_sync_for must be in [0, inf), got -1s"},
      // convoy_train: --agents=0 used to divide by zero after convoy_ps had started.
      {Binary::kTrain, "--agents=0", "--agents must be in [1, 256], got 0"},
      {Binary::kTrain, "--agents=257", "--agents must be in [1, 256], got 257"},
      {Binary::kTrain, "--ps_shards=0", "--ps_shards must be in [1, 64], got 0"},
      {Binary::kTrain, "--minutes=0", "--minutes must be in (0, inf), got 0"},
      {Binary::kTrain, "--eval_episodes=0", "--eval_episodes must be in [1, 100000], got 0"},
      {Binary::kTrain, "--batch_size=0", "--batch_size must be in [1, 65536], got 0"},
      {Binary::kTrain, "--batch_update_frequency=-3",
       "--batch_update_frequency must be in [1, 65536], got -3"},
      {Binary::kTrain, "--replay_memory_size=0", "--replay_memory_size must be in [1, inf), got 0"},
      {Binary::kTrain, "--min_replay_size=0", "--min_replay_size must be in [1, inf), got 0"},
      {Binary::kTrain, "--replay_ratio=-1", "--replay_ratio must be in (0, inf), got -1"},
      {Binary::kTrain, "--torch_threads=2000", "--torch_threads must be in [0, 1024], got 2000"},
      {Binary::kTrain, "--n_step=101", "--n_step must be in [1, 100], got 101"},
      {Binary::kTrain, "--gamma=2", "--gamma must be in [0, 1], got 2"},
      {Binary::kTrain, "--learning_rate=0", "--learning_rate must be in (0, inf), got 0"},
      {Binary::kTrain, "--target_update_frequency=0",
       "--target_update_frequency must be in [1, inf), got 0"},
      {Binary::kTrain, "--min_epsilon=1.5", "--min_epsilon must be in [0, 1], got 1.5"},
      {Binary::kTrain, "--per_iter_epsilon_reduction=-0.1",
       "--per_iter_epsilon_reduction must be in [0, 1], got -0.1"},
      {Binary::kTrain, "--max_epoch_runtime_sec=-5",
       "--max_epoch_runtime_sec must be in (0, inf), got -5"},
      {Binary::kTrain, "--report_seconds=0", "--report_seconds must be in (0, inf), got 0"},
      {Binary::kTrain, "--validate_every_seconds=-1",
       "--validate_every_seconds must be in [0, inf), got -1"},
      {Binary::kTrain, "--validation_episodes=0",
       "--validation_episodes must be in [1, 100000], got 0"},
      // The others: a few each.
      {Binary::kSyntheticAgent, "--seconds=-1", "--seconds must be in [0, inf), got -1"},
      {Binary::kSyntheticAgent, "--report_seconds=0",
       "--report_seconds must be in (0, inf), got 0"},
      {Binary::kSyntheticAgent, "--noise=-1", "--noise must be in [0, inf), got -1"},
      {Binary::kSyntheticAgent, "--push_every=-5ms", "--push_every must be in [0, inf), got -5ms"},
      {Binary::kSyntheticAgent, "--call_timeout=0", "--call_timeout must be in (0, inf), got 0"},
      {Binary::kSyntheticAgent, "--retry_for=-1s", "--retry_for must be in [0, inf), got -1s"},
      {Binary::kSyntheticAgent, "--join_for=-1s", "--join_for must be in [0, inf), got -1s"},
      {Binary::kEval, "--episodes=0", "--episodes must be in [1, 100000], got 0"},
      {Binary::kEval, "--scenario=rush_hour",
       "--scenario: unknown scenario 'rush_hour'; known: traffic, parked, empty"},
      {Binary::kEval, "--max_epoch_runtime_sec=0",
       "--max_epoch_runtime_sec must be in (0, inf), got 0"},
      {Binary::kSim, "--port=70000", "--port must be in [0, 65535], got 70000"},
      {Binary::kSim, "--scenario=rush_hour",
       "--scenario: unknown scenario 'rush_hour'; known: traffic, parked, empty"},
      {Binary::kTrain, "--scenario=rush_hour",
       "--scenario: unknown scenario 'rush_hour'; known: traffic, parked, empty"},
      {Binary::kSim, "--camera_width=0", "--camera_width must be in [1, 8192], got 0"},
      {Binary::kSim, "--step_seconds=0", "--step_seconds must be in (0, 10], got 0"},
      {Binary::kSim, "--camera_fov_deg=180", "--camera_fov_deg must be in (0, 180), got 180"},
      {Binary::kSim, "--max_connections=0", "--max_connections must be in [1, 65536], got 0"},
      {Binary::kBenchPs, "--seconds=0", "--seconds must be in (0, inf), got 0"},
      {Binary::kBenchPs, "--tcp_repeats=0", "--tcp_repeats must be in [1, 1000], got 0"},
      {Binary::kBenchPs, "--repeats=0", "--repeats must be in [1, 1000], got 0"},
      {Binary::kBenchSim, "--threads=-1", "--threads must be in [0, 1024], got -1"},
      {Binary::kBenchSim, "--seconds=-2", "--seconds must be in (0, inf), got -2"},
  };
  return cases;
}

TEST_CASE("A numeric flag out of range exits 2 naming the flag and its range and makes no file",
          "[flag_ranges]") {
  const std::string logs = MakeTempDir("convoy_flag_logs");
  int index = 0;
  for (const BadValue& bad : BadValues()) {
    std::vector<std::string> argv = Argv(bad.binary, "");
    DYNAMIC_SECTION(fs::path(argv[0]).filename().string() << " " << bad.flag) {
      // An empty working directory of its own, where every output of the binary would go.
      const std::string dir = MakeTempDir("convoy_flag_range");
      REQUIRE(!dir.empty());
      argv = Argv(bad.binary, dir);
      argv.push_back(bad.flag);  // The last value of a flag is the one that counts.
      const std::string log = absl::StrCat(logs, "/", index, ".log");
      absl::StatusOr<Subprocess> process = Subprocess::Start(argv, log, dir);
      REQUIRE(process.ok());
      const std::optional<int> code = process->Wait(absl::Seconds(60));
      if (!code.has_value()) process->Signal(SIGKILL);
      const std::string output = ReadWholeFile(log);
      INFO(output);
      CHECK(code == 2);
      CHECK(output.find(bad.message) != std::string::npos);
      CHECK(fs::is_empty(dir));
      fs::remove_all(dir);
    }
    ++index;
  }
}

}  // namespace
}  // namespace convoy::deploy
