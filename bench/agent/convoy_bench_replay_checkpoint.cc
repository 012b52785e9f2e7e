// convoy_bench_replay_checkpoint: how long SaveReplayCheckpoint and LoadReplayCheckpoint take on a
// full replay memory of an agent's default size and frames, how large the file is, and how long Add
// waits while a save runs. The frames are rendered by the embedded simulator (the cookbook crop,
// pooled to the model's input as the agent does) under an exploring driver. Prints a table, then
// RESULT key=value lines. Not a test: numbers depend on the machine and its disk.
#include <glog/logging.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "agent/environment/preprocess.h"
#include "agent/learning/replay_checkpoint.h"
#include "agent/learning/replay_memory.h"
#include "bench/bench_support.h"
#include "common/model/model_registry.h"
#include "common/settings/agent_settings.h"
#include "common/settings/run_defaults.h"
#include "common/support/files.h"
#include "common/support/init.h"
#include "simulator_bridge/task/driving_env.h"
#include "simulator_bridge/task/expert_driver.h"
#include "simulator_bridge/world/embedded_sim.h"
#include "simulator_bridge/world/world.h"

ABSL_FLAG(uint64_t, transitions, convoy::AgentSettings{}.replay_memory_size,
          "Replay memory capacity, all of it filled (the agent's --replay_memory_size).");
ABSL_FLAG(std::string, model, convoy::run_defaults::kLocalModel,
          "Model whose input frames fill the memory (the agent's default: compact, 3x14x63).");
ABSL_FLAG(double, epsilon, 0.3,
          "Share of random actions of the driver filling the memory (the rest: ExpertDriver's).");
ABSL_FLAG(int, repeats, 3, "Saves and loads timed; the table gives their medians.");
ABSL_FLAG(double, add_rate, 1000.0,
          "Adds per second of the acting thread while a save runs (the paced measurement).");
ABSL_FLAG(std::string, dir, "",
          "Directory for the checkpoint (default: a fresh one under $TMPDIR, removed after).");
ABSL_FLAG(uint64_t, seed, 1, "Seed of the episodes and the driver's random actions.");

namespace convoy::bench {
namespace {

using Clock = BenchClock;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The header replay_memory.cc writes before the deflated body, and the digest after it.
constexpr size_t kHeaderBytes = 89;
constexpr size_t kDigestBytes = 32;

// The checkpoint's size were it not deflated: its body inflated, plus header and digest.
uint64_t UncompressedBytes(const std::string& path) {
  absl::StatusOr<std::string> file = ReadFileToString(path);
  BENCH_CHECK_OK(file.status());
  CHECK_GT(file->size(), kHeaderBytes + kDigestBytes);
  z_stream z{};
  CHECK_EQ(inflateInit(&z), Z_OK);
  z.next_in = reinterpret_cast<Bytef*>(file->data() + kHeaderBytes);
  z.avail_in = static_cast<uInt>(file->size() - kHeaderBytes - kDigestBytes);
  std::vector<uint8_t> out(1 << 20);
  uint64_t total = 0;
  int rc = Z_OK;
  while (rc == Z_OK) {
    z.next_out = out.data();
    z.avail_out = static_cast<uInt>(out.size());
    rc = inflate(&z, Z_NO_FLUSH);
    total += out.size() - z.avail_out;
  }
  CHECK_EQ(rc, Z_STREAM_END) << "the checkpoint's body does not inflate";
  inflateEnd(&z);
  return kHeaderBytes + total + kDigestBytes;
}

// The memory filled from the embedded simulator: episodes under an epsilon-greedy expert, frames
// pooled to the model's input, terminal on a failure and cut by StartEpisode on the time limit,
// as the agent stores them. Also keeps `spare` frames for the adder threads.
struct Filled {
  std::unique_ptr<agent::ReplayMemory> memory;
  std::vector<std::vector<uint8_t>> spare;
  double render_seconds = 0;
  uint64_t episodes = 0;
};

Filled Fill(const agent::ReplayOptions& options, uint64_t transitions, double epsilon,
            uint64_t seed) {
  absl::StatusOr<std::shared_ptr<const sim::World>> world = sim::World::CreateDefault();
  BENCH_CHECK_OK(world.status());
  sim::EmbeddedSimOptions sim_options;
  sim_options.world = *world;
  sim_options.seed = seed;
  sim::DrivingEnvOptions env_options;  // the cookbook crop, as AirSim would render it
  absl::StatusOr<std::unique_ptr<sim::DrivingEnv>> env =
      sim::DrivingEnv::CreateEmbedded(sim_options, env_options);
  BENCH_CHECK_OK(env.status());
  absl::StatusOr<agent::Preprocess> preprocess =
      agent::Preprocess::Create((*env)->observation_shape(), options.frame_shape);
  BENCH_CHECK_OK(preprocess.status());
  const sim::ExpertDriver expert((*env)->map());

  Filled filled;
  absl::StatusOr<std::unique_ptr<agent::ReplayMemory>> memory =
      agent::ReplayMemory::Create(options);
  BENCH_CHECK_OK(memory.status());
  filled.memory = *std::move(memory);
  std::vector<uint8_t> observation((*env)->observation_size());
  std::vector<uint8_t> frame(preprocess->output_size());
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const Clock::time_point start = Clock::now();
  uint64_t added = 0;
  while (added < transitions) {
    absl::StatusOr<sim::StepResult> step =
        (*env)->Reset(seed + filled.episodes++, observation.data());
    BENCH_CHECK_OK(step.status());
    preprocess->Apply(observation.data(), frame.data());
    filled.memory->StartEpisode(frame.data());
    while (!step->done && added < transitions) {
      int action = static_cast<int>(rng() % static_cast<uint64_t>((*env)->num_actions()));
      if (unit(rng) >= epsilon) {
        absl::StatusOr<int> expert_action = expert.Act(**env);
        BENCH_CHECK_OK(expert_action.status());
        action = *expert_action;
      }
      step = (*env)->Step(action, observation.data());
      BENCH_CHECK_OK(step.status());
      preprocess->Apply(observation.data(), frame.data());
      filled.memory->Add(action, step->reward, step->done && !sim::IsTruncation(step->reason),
                         frame.data());
      ++added;
      if (filled.spare.size() < 1000) filled.spare.push_back(frame);
    }
  }
  filled.render_seconds = Since(start);
  // Learning's priorities: the tree holds many different values, as in a run.
  agent::ReplayBatch batch;
  std::vector<float> td;
  for (int i = 0; i < 2000 && filled.memory->Sample(run_defaults::kBatchSize, &batch).ok(); ++i) {
    td.resize(batch.size);
    for (float& t : td) t = static_cast<float>(unit(rng) * 2.0);
    filled.memory->UpdatePriorities(batch.ids.data(), td.data(), batch.size);
  }
  return filled;
}

struct AddWhileSaving {
  double save_seconds = 0;
  uint64_t adds = 0;
  double longest_add_ms = 0;
  double add_seconds = 0;  // all the Adds during the save together
};

// Saves `memory` while another thread adds spare frames (episodes of 200 steps), at `rate` Adds
// per second (0: as fast as it can), and times each Add.
AddWhileSaving SaveWhileAdding(agent::ReplayMemory* memory,
                               const std::vector<std::vector<uint8_t>>& spare,
                               const std::string& path, double rate) {
  std::atomic<bool> saving{true};
  AddWhileSaving result;
  std::thread adder([&] {
    const Clock::duration period =
        rate > 0
            ? std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(1.0 / rate))
            : Clock::duration::zero();
    Clock::time_point next = Clock::now();
    size_t i = 0;
    while (saving) {
      const bool start = i % 200 == 0;
      const Clock::time_point before = Clock::now();
      if (start) {
        memory->StartEpisode(spare[i % spare.size()].data());
      } else {
        memory->Add(static_cast<int>(i % 5), 0.5f, false, spare[i % spare.size()].data());
      }
      const double seconds = Since(before);
      ++i;
      ++result.adds;
      result.add_seconds += seconds;
      result.longest_add_ms = std::max(result.longest_add_ms, 1e3 * seconds);
      if (rate > 0) {
        next += period;
        std::this_thread::sleep_until(next);
      }
    }
  });
  const Clock::time_point start = Clock::now();
  BENCH_CHECK_OK(agent::SaveReplayCheckpoint(*memory, path));
  result.save_seconds = Since(start);
  saving = false;
  adder.join();
  return result;
}

int Main() {
  absl::StatusOr<ModelSpec> spec = ResolveModel(absl::GetFlag(FLAGS_model));
  BENCH_CHECK_OK(spec.status());
  // The agent's replay options (agent/agent.cc): run defaults, frames of the model's input, as
  // many stacked as its channels take.
  agent::ReplayOptions options;
  options.capacity = absl::GetFlag(FLAGS_transitions);
  options.frame_shape = {3, spec->height, spec->width};
  options.frame_stack = spec->channels / 3;
  options.seed = absl::GetFlag(FLAGS_seed);

  bool own_dir = false;
  const std::string dir = BenchDirectory(absl::GetFlag(FLAGS_dir), "replay-bench", &own_dir);
  const std::string path = dir + "/replay.ckpt";

  std::printf("filling %lu transitions of %dx%dx%d frames (stack %d) from the embedded simulator\n",
              static_cast<unsigned long>(options.capacity), options.frame_shape[0],
              options.frame_shape[1], options.frame_shape[2], options.frame_stack);
  std::fflush(stdout);
  Filled filled =
      Fill(options, options.capacity, absl::GetFlag(FLAGS_epsilon), absl::GetFlag(FLAGS_seed));
  agent::ReplayMemory& memory = *filled.memory;
  std::printf("rendered in %.1f s (%lu episodes); size() %lu, %.1f MB allocated\n",
              filled.render_seconds, static_cast<unsigned long>(filled.episodes),
              static_cast<unsigned long>(memory.size()), memory.memory_bytes() / 1e6);

  const int repeats = std::max(1, absl::GetFlag(FLAGS_repeats));
  std::vector<double> save_seconds, load_seconds;
  for (int i = 0; i < repeats; ++i) {
    const Clock::time_point start = Clock::now();
    BENCH_CHECK_OK(agent::SaveReplayCheckpoint(memory, path));
    save_seconds.push_back(Since(start));
  }
  std::unique_ptr<agent::ReplayMemory> loaded;
  for (int i = 0; i < repeats; ++i) {
    const Clock::time_point start = Clock::now();
    absl::StatusOr<std::unique_ptr<agent::ReplayMemory>> memory_loaded =
        agent::LoadReplayCheckpoint(path, options);
    load_seconds.push_back(Since(start));
    BENCH_CHECK_OK(memory_loaded.status());
    loaded = *std::move(memory_loaded);
  }
  // The loaded memory answers as the original (the same random state gives the same batch).
  agent::ReplayBatch a, b;
  BENCH_CHECK_OK(memory.Sample(run_defaults::kBatchSize, &a));
  BENCH_CHECK_OK(loaded->Sample(run_defaults::kBatchSize, &b));
  const bool same = memory.size() == loaded->size() && a.ids == b.ids &&
                    a.observations == b.observations && a.weights == b.weights;
  loaded.reset();

  const uint64_t file_bytes = std::filesystem::file_size(path);
  const uint64_t raw_bytes = UncompressedBytes(path);

  // Add during a save: before, the Add alone; then at the paced rate and flat out.
  const AddWhileSaving paced =
      SaveWhileAdding(&memory, filled.spare, path, absl::GetFlag(FLAGS_add_rate));
  const AddWhileSaving flat_out = SaveWhileAdding(&memory, filled.spare, path, 0);
  std::vector<double> alone;
  for (int i = 0; i < 2000; ++i) {
    const Clock::time_point start = Clock::now();
    memory.Add(i % 5, 0.5f, false, filled.spare[i % filled.spare.size()].data());
    alone.push_back(Since(start));
  }

  const double save = Median(save_seconds), load = Median(load_seconds);
  std::printf("\n%-52s %14s\n", "replay memory checkpoint", "");
  std::printf("%-52s %14lu\n", "transitions (size())", static_cast<unsigned long>(memory.size()));
  std::printf("%-52s %14.1f\n", "file, MB", file_bytes / 1e6);
  std::printf("%-52s %14.1f\n", "uncompressed (body inflated + header + digest), MB",
              raw_bytes / 1e6);
  std::printf("%-52s %14.2f\n", "compression ratio", static_cast<double>(raw_bytes) / file_bytes);
  std::printf("%-52s %14.3f\n", "save, s (median)", save);
  std::printf("%-52s %14.3f\n", "load, s (median)", load);
  std::printf("%-52s %14.0f\n", "save, uncompressed MB/s", raw_bytes / 1e6 / save);
  std::printf("%-52s %14.0f\n", "load, uncompressed MB/s", raw_bytes / 1e6 / load);
  std::printf("%-52s %14s\n", "loaded memory samples as the original", same ? "yes" : "NO");
  std::printf("%-52s %14.3f\n", "Add alone, median us", 1e6 * Median(alone));
  std::printf("%-52s %14.3f\n", "Add alone, longest us",
              1e6 * *std::max_element(alone.begin(), alone.end()));
  const std::string paced_label =
      absl::StrCat("save with Adds at ", absl::GetFlag(FLAGS_add_rate), "/s");
  std::printf("%-52s %14.3f\n", (paced_label + ": save s").c_str(), paced.save_seconds);
  std::printf("%-52s %14lu\n", (paced_label + ": Adds during it").c_str(),
              static_cast<unsigned long>(paced.adds));
  std::printf("%-52s %14.3f\n", (paced_label + ": longest Add ms").c_str(), paced.longest_add_ms);
  std::printf("%-52s %14.3f\n", (paced_label + ": all Adds ms").c_str(), 1e3 * paced.add_seconds);
  std::printf("%-52s %14.3f\n", "save with Adds flat out: save s", flat_out.save_seconds);
  std::printf("%-52s %14lu\n", "save with Adds flat out: Adds during it",
              static_cast<unsigned long>(flat_out.adds));
  std::printf("%-52s %14.3f\n", "save with Adds flat out: longest Add ms", flat_out.longest_add_ms);
  std::printf("%-52s %14.3f\n", "save with Adds flat out: all Adds s", flat_out.add_seconds);
  std::printf("(frames rendered by the embedded simulator, cookbook crop pooled to %dx%dx%d)\n",
              options.frame_shape[0], options.frame_shape[1], options.frame_shape[2]);

  std::printf("RESULT transitions=%lu\n", static_cast<unsigned long>(memory.size()));
  std::printf("RESULT frame_shape=%dx%dx%d\n", options.frame_shape[0], options.frame_shape[1],
              options.frame_shape[2]);
  std::printf("RESULT frames=rendered\n");
  std::printf("RESULT file_bytes=%lu\n", static_cast<unsigned long>(file_bytes));
  std::printf("RESULT uncompressed_bytes=%lu\n", static_cast<unsigned long>(raw_bytes));
  std::printf("RESULT save_seconds=%.3f\n", save);
  std::printf("RESULT load_seconds=%.3f\n", load);
  std::printf("RESULT loaded_same=%d\n", same ? 1 : 0);
  std::printf("RESULT add_alone_median_us=%.2f\n", 1e6 * Median(alone));
  std::printf("RESULT paced_add_rate=%.0f\n", absl::GetFlag(FLAGS_add_rate));
  std::printf("RESULT paced_longest_add_ms=%.3f\n", paced.longest_add_ms);
  std::printf("RESULT paced_add_blocked_ms=%.3f\n", 1e3 * paced.add_seconds);
  std::printf("RESULT flat_out_adds_during_save=%lu\n", static_cast<unsigned long>(flat_out.adds));
  std::printf("RESULT flat_out_longest_add_ms=%.3f\n", flat_out.longest_add_ms);
  std::printf("RESULT flat_out_add_seconds=%.3f\n", flat_out.add_seconds);
  std::printf("RESULT flat_out_save_seconds=%.3f\n", flat_out.save_seconds);

  if (own_dir) {
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
  }
  return same ? 0 : 1;
}

}  // namespace
}  // namespace convoy::bench

int main(int argc, char** argv) {
  convoy::InitProcess(argc, argv,
                      "convoy_bench_replay_checkpoint: SaveReplayCheckpoint/LoadReplayCheckpoint "
                      "on a full memory of "
                      "rendered frames. Prints a table and RESULT key=value lines.");
  return convoy::bench::Main();
}
