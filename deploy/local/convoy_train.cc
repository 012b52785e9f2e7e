// convoy_train: the one-machine training run. Starts convoy_ps and N convoy_agent processes (found
// beside this binary) on the embedded simulator, trains for a bounded time printing one merged
// progress line, then evaluates the greedy policy on fixed-seed episodes beside a random policy and
// prints the table and RESULT lines. Checkpoints and logs go under runs/<name>/. Ctrl-C stops every
// process cleanly with a final checkpoint. (Clusters use Slurm or Kubernetes instead: see
// docs/deploy.md.)
#include <glog/logging.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "agent/evaluation.h"
#include "agent/map_image.h"
#include "common/init.h"
#include "common/model_registry.h"
#include "deploy/local/local_cluster.h"

ABSL_FLAG(double, minutes, 10, "Training time.");
ABSL_FLAG(
    uint64_t, steps_per_agent, 0,
    "Also stop each agent after this many environment steps (0: time only). Bounds a run by work "
    "rather than by the machine's speed.");
ABSL_FLAG(int, agents, 2, "Agent processes.");
ABSL_FLAG(std::string, name, "",
          "Run name (default: train-<date>-<time>); files go to <runs_dir>/<name>.");
ABSL_FLAG(std::string, runs_dir, "runs", "Directory of runs.");
ABSL_FLAG(std::string, model, convoy::LocalClusterOptions{}.model, "Q-network (registry name).");
ABSL_FLAG(uint64_t, seed, 1, "Seed; agent i uses seed + i.");
ABSL_FLAG(int, eval_episodes, 20, "Evaluation episodes at the end (fixed seeds).");
ABSL_FLAG(std::string, device, "auto", "Agents' device: auto, cpu, cuda, cuda:N.");
ABSL_FLAG(int, batch_size, convoy::LocalClusterOptions{}.batch_size, "Minibatch size.");
ABSL_FLAG(int, batch_update_frequency, convoy::LocalClusterOptions{}.batch_update_frequency,
          "Minibatches per push.");
ABSL_FLAG(uint64_t, replay_memory_size, convoy::LocalClusterOptions{}.replay_memory_size,
          "Replay capacity per agent, transitions.");
ABSL_FLAG(uint64_t, min_replay_size, convoy::LocalClusterOptions{}.min_replay_size,
          "Transitions before learning starts.");
ABSL_FLAG(double, replay_ratio, convoy::LocalClusterOptions{}.replay_ratio,
          "Sampled transitions per environment step.");
ABSL_FLAG(double, learning_rate, convoy::LocalClusterOptions{}.learning_rate,
          "Server's Adam learning rate.");
ABSL_FLAG(uint64_t, target_update_frequency, convoy::LocalClusterOptions{}.target_update_frequency,
          "Applied minibatches between target snapshots.");
ABSL_FLAG(double, min_epsilon, convoy::LocalClusterOptions{}.min_epsilon, "Epsilon floor.");
ABSL_FLAG(double, per_iter_epsilon_reduction,
          convoy::LocalClusterOptions{}.per_iter_epsilon_reduction,
          "Epsilon decrease per applied update.");
ABSL_FLAG(double, max_epoch_runtime_sec, convoy::LocalClusterOptions{}.max_epoch_runtime_sec,
          "Episode time limit, simulation seconds.");
ABSL_FLAG(double, report_seconds, 5, "Seconds between merged progress lines.");

namespace convoy {
namespace {

std::atomic<bool> g_stop{false};

void PrintMerged(const ClusterTotals& totals, size_t agents, absl::Duration elapsed,
                 absl::Duration total, uint64_t ps_version) {
  const absl::Duration left = std::max(absl::ZeroDuration(), total - elapsed);
  std::fprintf(
      stderr,
      "[%5.1f min] %zu agents | %.0f episodes | %.0f env steps (%.0f/s) | %.0f train steps "
      "(%.1f/s) | avg return %.1f | eps %.2f | PS v%llu | %.1f min left\n",
      absl::ToDoubleMinutes(elapsed), agents, totals.episodes, totals.env_steps,
      totals.env_steps_per_s, totals.train_steps, totals.train_steps_per_s, totals.avg_return,
      totals.epsilon, static_cast<unsigned long long>(ps_version), absl::ToDoubleMinutes(left));
}

int Run() {
  std::string name = absl::GetFlag(FLAGS_name);
  if (name.empty())
    name = absl::FormatTime("train-%Y%m%d-%H%M%S", absl::Now(), absl::LocalTimeZone());
  const std::string run = absl::StrCat(absl::GetFlag(FLAGS_runs_dir), "/", name);
  std::filesystem::create_directories(run);
  const std::string model = absl::GetFlag(FLAGS_model);
  absl::StatusOr<ModelInfo> info = DescribeModel(model);
  if (!info.ok()) {
    LOG(ERROR) << info.status();
    return 2;
  }
  const int num_agents = absl::GetFlag(FLAGS_agents);
  const absl::Duration total = absl::Seconds(absl::GetFlag(FLAGS_minutes) * 60);
  std::fprintf(stderr, "convoy_train: run %s, model %s (%zu parameters), %d agents, %.1f minutes\n",
               run.c_str(), model.c_str(), info->parameter_count, num_agents,
               absl::ToDoubleMinutes(total));

  LocalClusterOptions options;
  options.run_dir = run;
  options.agents = num_agents;
  options.model = model;
  options.seed = absl::GetFlag(FLAGS_seed);
  options.device = absl::GetFlag(FLAGS_device);
  options.batch_size = absl::GetFlag(FLAGS_batch_size);
  options.batch_update_frequency = absl::GetFlag(FLAGS_batch_update_frequency);
  options.replay_memory_size = absl::GetFlag(FLAGS_replay_memory_size);
  options.min_replay_size = absl::GetFlag(FLAGS_min_replay_size);
  options.replay_ratio = absl::GetFlag(FLAGS_replay_ratio);
  options.learning_rate = absl::GetFlag(FLAGS_learning_rate);
  options.target_update_frequency = absl::GetFlag(FLAGS_target_update_frequency);
  options.min_epsilon = absl::GetFlag(FLAGS_min_epsilon);
  options.per_iter_epsilon_reduction = absl::GetFlag(FLAGS_per_iter_epsilon_reduction);
  options.max_epoch_runtime_sec = absl::GetFlag(FLAGS_max_epoch_runtime_sec);
  options.max_time = total;
  options.max_steps_per_agent = absl::GetFlag(FLAGS_steps_per_agent);
  options.report_every = absl::Seconds(absl::GetFlag(FLAGS_report_seconds));
  absl::StatusOr<std::unique_ptr<LocalCluster>> cluster = LocalCluster::Start(options);
  if (!cluster.ok()) {
    LOG(ERROR) << cluster.status();
    return 1;
  }

  const absl::Time start = absl::Now();
  absl::Time next_report = start + options.report_every;
  bool interrupted = false;
  while (true) {
    if ((*cluster)->Poll(absl::Milliseconds(200)) == 0) break;
    if (g_stop.load() && !interrupted) {
      interrupted = true;
      std::fprintf(stderr, "convoy_train: stopping every process cleanly\n");
      (*cluster)->SignalAgents(SIGTERM);
    }
    if (absl::Now() >= next_report) {
      PrintMerged((*cluster)->Totals(), (*cluster)->progress().size(), absl::Now() - start, total,
                  (*cluster)->PsVersion());
      next_report += options.report_every;
    }
  }
  const int failed_agents = (*cluster)->WaitForAgents(absl::Seconds(5));
  std::vector<float> weights;
  absl::StatusOr<PullResult> pulled = (*cluster)->PullWeights(&weights);
  const std::optional<int> ps_code = (*cluster)->Stop(absl::Seconds(60));
  std::fprintf(stderr, "convoy_train: convoy_ps stopped (%s); checkpoints in %s/checkpoints\n",
               ps_code == 0 ? "final checkpoint written" : "see convoy_ps.log", run.c_str());
  if (!pulled.ok()) {
    LOG(ERROR) << "cannot fetch the trained weights: " << pulled.status();
    return 1;
  }
  if (interrupted) return 130;

  std::fprintf(
      stderr, "convoy_train: evaluating the greedy policy at version %llu on %d episodes\n",
      static_cast<unsigned long long>(pulled->version), absl::GetFlag(FLAGS_eval_episodes));
  EnvironmentSpec spec;
  spec.env.max_epoch_runtime_sec = absl::GetFlag(FLAGS_max_epoch_runtime_sec);
  absl::StatusOr<Comparison> result =
      CompareWithRandom(model, weights, spec, absl::GetFlag(FLAGS_eval_episodes));
  if (!result.ok()) {
    LOG(ERROR) << "evaluation failed: " << result.status();
    return 1;
  }
  const std::string table = FormatComparison(result->greedy, result->random);
  std::printf("%s", table.c_str());
  std::ofstream(run + "/evaluation.txt") << table;
  absl::StatusOr<std::unique_ptr<Environment>> env = MakeEnvironment(spec);
  if (env.ok()) {
    const std::string png = run + "/evaluation_map.png";
    if (WriteEpisodeMap(png, (*env)->env->map(), result->greedy).ok()) {
      std::printf("map of the greedy episodes: %s\n", png.c_str());
    }
  }
  return failed_agents == 0 ? 0 : 1;
}

}  // namespace
}  // namespace convoy

int main(int argc, char** argv) {
  convoy::InitProcess(
      argc, argv,
      "convoy_train: trains on this machine: convoy_ps + N agents, then evaluates.\n"
      "Usage: convoy_train [--minutes=10] [--agents=2] [--name=NAME]");
  struct sigaction action = {};
  action.sa_handler = [](int) { convoy::g_stop = true; };
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  return convoy::Run();
}
