// convoy_train: the one-machine training run. Starts convoy_ps and N convoy_agent processes (found beside this
// binary) on the embedded simulator, trains for a bounded time printing one merged progress line, then
// evaluates the greedy policy on fixed-seed episodes beside a random policy and prints the table and RESULT
// lines. Checkpoints and logs go under runs/<name>/. Ctrl-C stops every process cleanly with a final
// checkpoint. (Clusters use Slurm or Kubernetes instead: see docs/deploy.md.)
#include <glog/logging.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "agent/evaluation.h"
#include "agent/map_image.h"
#include "agent/ps_client.h"
#include "common/child_process.h"
#include "common/init.h"
#include "common/model_registry.h"

ABSL_FLAG(double, minutes, 10, "Training time.");
ABSL_FLAG(uint64_t, steps_per_agent, 0,
          "Also stop each agent after this many environment steps (0: time only). Bounds a run by work "
          "rather than by the machine's speed.");
ABSL_FLAG(int, agents, 2, "Agent processes.");
ABSL_FLAG(std::string, name, "", "Run name (default: train-<date>-<time>); files go to <runs_dir>/<name>.");
ABSL_FLAG(std::string, runs_dir, "runs", "Directory of runs.");
ABSL_FLAG(std::string, model, "compact", "Q-network (registry name).");
ABSL_FLAG(uint64_t, seed, 1, "Seed; agent i uses seed + i.");
ABSL_FLAG(int, eval_episodes, 20, "Evaluation episodes at the end (fixed seeds).");
ABSL_FLAG(std::string, device, "auto", "Agents' device: auto, cpu, cuda, cuda:N.");
ABSL_FLAG(int, batch_size, 32, "Minibatch size.");
ABSL_FLAG(int, batch_update_frequency, 4, "Minibatches per push.");
ABSL_FLAG(uint64_t, replay_memory_size, 50000, "Replay capacity per agent, transitions.");
ABSL_FLAG(uint64_t, min_replay_size, 1000, "Transitions before learning starts.");
ABSL_FLAG(double, replay_ratio, 8.0, "Sampled transitions per environment step.");
ABSL_FLAG(double, learning_rate, 1e-3, "Server's Adam learning rate.");
ABSL_FLAG(uint64_t, target_update_frequency, 300, "Applied minibatches between target snapshots.");
ABSL_FLAG(double, min_epsilon, 0.1, "Epsilon floor.");
ABSL_FLAG(double, per_iter_epsilon_reduction, 0.003, "Epsilon decrease per applied update.");
ABSL_FLAG(double, max_epoch_runtime_sec, 30.0, "Episode time limit, simulation seconds.");
ABSL_FLAG(double, report_seconds, 5, "Seconds between merged progress lines.");

namespace convoy {
namespace {

std::atomic<bool> g_stop{false};

struct AgentProgress {
  std::map<std::string, std::string> fields;
  std::string partial;  // An incomplete line read so far.
  double Get(const std::string& key) const {
    double v = 0;
    auto it = fields.find(key);
    if (it != fields.end() && absl::SimpleAtod(it->second, &v)) return v;
    return 0;
  }
};

// Reads whatever the agents printed; keeps the newest PROGRESS fields of each.
void DrainProgress(std::vector<ChildProcess>& agents, std::vector<AgentProgress>& progress,
                   absl::Duration wait) {
  std::vector<pollfd> fds;
  for (ChildProcess& a : agents) fds.push_back({a.stdout_fd(), POLLIN, 0});
  if (::poll(fds.data(), fds.size(), static_cast<int>(absl::ToInt64Milliseconds(wait))) <= 0) return;
  char buffer[4096];
  for (size_t i = 0; i < fds.size(); ++i) {
    if (!(fds[i].revents & POLLIN)) continue;
    const ssize_t n = ::read(fds[i].fd, buffer, sizeof(buffer));
    if (n <= 0) continue;
    progress[i].partial.append(buffer, static_cast<size_t>(n));
    size_t newline;
    while ((newline = progress[i].partial.find('\n')) != std::string::npos) {
      const std::string line = progress[i].partial.substr(0, newline);
      progress[i].partial.erase(0, newline + 1);
      if (line.rfind("PROGRESS ", 0) != 0) continue;
      for (absl::string_view field : absl::StrSplit(line.substr(9), ' ', absl::SkipEmpty())) {
        std::pair<std::string, std::string> kv = absl::StrSplit(field, absl::MaxSplits('=', 1));
        progress[i].fields[kv.first] = kv.second;
      }
    }
  }
}

void PrintMerged(const std::vector<AgentProgress>& progress, absl::Duration elapsed,
                 absl::Duration total, uint64_t ps_version) {
  double episodes = 0, steps = 0, train = 0, env_sps = 0, train_sps = 0, ret = 0, eps = 0;
  int reporting = 0;
  for (const AgentProgress& p : progress) {
    if (p.fields.empty()) continue;
    ++reporting;
    episodes += p.Get("episodes");
    steps += p.Get("env_steps");
    train += p.Get("train_steps");
    env_sps += p.Get("env_sps");
    train_sps += p.Get("train_sps");
    ret += p.Get("avg_return");
    eps += p.Get("epsilon");
  }
  if (reporting > 0) {
    ret /= reporting;
    eps /= reporting;
  }
  const absl::Duration left = std::max(absl::ZeroDuration(), total - elapsed);
  std::fprintf(stderr,
               "[%5.1f min] %zu agents | %.0f episodes | %.0f env steps (%.0f/s) | %.0f train steps "
               "(%.1f/s) | avg return %.1f | eps %.2f | PS v%llu | %.1f min left\n",
               absl::ToDoubleMinutes(elapsed), progress.size(), episodes, steps, env_sps, train,
               train_sps, ret, eps, static_cast<unsigned long long>(ps_version),
               absl::ToDoubleMinutes(left));
}

absl::StatusOr<int> WaitForPort(const std::string& port_file, ChildProcess& ps) {
  const absl::Time deadline = absl::Now() + absl::Seconds(120);
  while (absl::Now() < deadline && ps.running()) {
    std::ifstream in(port_file);
    int port = 0;
    if (in >> port && port > 0) return port;
    absl::SleepFor(absl::Milliseconds(50));
  }
  return absl::UnavailableError("convoy_ps did not start; see its log");
}

int Run() {
  const std::string bin = ExecutableDirectory();
  std::string name = absl::GetFlag(FLAGS_name);
  if (name.empty()) name = absl::FormatTime("train-%Y%m%d-%H%M%S", absl::Now(), absl::LocalTimeZone());
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

  const std::string port_file = run + "/ps.port";
  std::filesystem::remove(port_file);
  ChildProcess::Options ps_options;
  ps_options.log_path = run + "/convoy_ps.log";
  absl::StatusOr<ChildProcess> ps = ChildProcess::Start(
      {bin + "/convoy_ps", "--port=0", "--bind=127.0.0.1", "--port_file=" + port_file,
       "--checkpoint_dir=" + run + "/checkpoints", "--checkpoint_every_seconds=60",
       "--model=" + model, absl::StrCat("--seed=", absl::GetFlag(FLAGS_seed)),
       absl::StrCat("--learning_rate=", absl::GetFlag(FLAGS_learning_rate)),
       absl::StrCat("--target_update_frequency=", absl::GetFlag(FLAGS_target_update_frequency)),
       absl::StrCat("--min_epsilon=", absl::GetFlag(FLAGS_min_epsilon)),
       absl::StrCat("--per_iter_epsilon_reduction=", absl::GetFlag(FLAGS_per_iter_epsilon_reduction)),
       absl::StrCat("--batch_size=", absl::GetFlag(FLAGS_batch_size)),
       absl::StrCat("--batch_update_frequency=", absl::GetFlag(FLAGS_batch_update_frequency)),
       absl::StrCat("--apex_num_agents=", num_agents)},
      ps_options);
  if (!ps.ok()) {
    LOG(ERROR) << ps.status();
    return 1;
  }
  absl::StatusOr<int> port = WaitForPort(port_file, *ps);
  if (!port.ok()) {
    LOG(ERROR) << port.status() << " (" << ps_options.log_path << ")";
    return 1;
  }
  const std::string address = absl::StrCat("127.0.0.1:", *port);

  std::vector<ChildProcess> agents;
  for (int i = 0; i < num_agents; ++i) {
    const std::string log_dir = absl::StrCat(run, "/agent-", i);
    std::filesystem::create_directories(log_dir);
    ChildProcess::Options options;
    options.log_path = log_dir + "/agent.log";
    options.pipe_stdout = true;
    absl::StatusOr<ChildProcess> agent = ChildProcess::Start(
        {bin + "/convoy_agent", "--ps=" + address, absl::StrCat("--agent_id=agent-", i),
         absl::StrCat("--agent_index=", i), absl::StrCat("--seed=", absl::GetFlag(FLAGS_seed) + i),
         "--model=" + model, "--device=" + absl::GetFlag(FLAGS_device),
         absl::StrCat("--torch_threads=",
                      std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / num_agents)),
         absl::StrCat("--max_minutes=", absl::GetFlag(FLAGS_minutes)),
         absl::StrCat("--max_steps=", absl::GetFlag(FLAGS_steps_per_agent)), "--log_dir=" + log_dir,
         "--machine_progress", absl::StrCat("--batch_size=", absl::GetFlag(FLAGS_batch_size)),
         absl::StrCat("--batch_update_frequency=", absl::GetFlag(FLAGS_batch_update_frequency)),
         absl::StrCat("--replay_memory_size=", absl::GetFlag(FLAGS_replay_memory_size)),
         absl::StrCat("--min_replay_size=", absl::GetFlag(FLAGS_min_replay_size)),
         absl::StrCat("--replay_ratio=", absl::GetFlag(FLAGS_replay_ratio)),
         absl::StrCat("--max_epoch_runtime_sec=", absl::GetFlag(FLAGS_max_epoch_runtime_sec)),
         absl::StrCat("--report_seconds=", absl::GetFlag(FLAGS_report_seconds))},
        options);
    if (!agent.ok()) {
      LOG(ERROR) << agent.status();
      return 1;
    }
    agents.push_back(*std::move(agent));
  }

  PsClientOptions client_options;
  client_options.address = address;
  client_options.agent_id = "convoy_train";
  client_options.model_fingerprint = info->fingerprint;
  client_options.retry_for = absl::Seconds(10);
  PsClient client(client_options);

  std::vector<AgentProgress> progress(agents.size());
  const absl::Time start = absl::Now();
  absl::Time next_report = start + absl::Seconds(absl::GetFlag(FLAGS_report_seconds));
  bool interrupted = false;
  while (true) {
    DrainProgress(agents, progress, absl::Milliseconds(200));
    size_t running = 0;
    for (ChildProcess& a : agents) running += a.running() ? 1 : 0;
    if (running == 0) break;
    if (g_stop.load() && !interrupted) {
      interrupted = true;
      std::fprintf(stderr, "convoy_train: stopping every process cleanly\n");
      for (ChildProcess& a : agents) a.Signal(SIGTERM);
    }
    if (absl::Now() >= next_report) {
      absl::StatusOr<v1::StatusResponse> status = client.Status();
      PrintMerged(progress, absl::Now() - start, total, status.ok() ? status->version() : 0);
      next_report += absl::Seconds(absl::GetFlag(FLAGS_report_seconds));
    }
  }
  int failed_agents = 0;
  for (size_t i = 0; i < agents.size(); ++i) {
    const std::optional<int> code = agents[i].Wait(absl::Seconds(5));
    if (code != 0) {
      ++failed_agents;
      LOG(ERROR) << "agent-" << i << " exited with " << (code ? *code : -1) << "; see " << run
                 << "/agent-" << i << "/agent.log";
    }
  }
  std::vector<float> weights;
  absl::StatusOr<PullResult> pulled = client.Pull(0, 0, v1::NETWORK_ONLINE, &weights);
  ps->Signal(SIGTERM);
  const std::optional<int> ps_code = ps->Wait(absl::Seconds(60));
  std::fprintf(stderr, "convoy_train: convoy_ps stopped (%s); checkpoints in %s/checkpoints\n",
               ps_code == 0 ? "final checkpoint written" : "see convoy_ps.log", run.c_str());
  if (!pulled.ok()) {
    LOG(ERROR) << "cannot fetch the trained weights: " << pulled.status();
    return 1;
  }
  if (interrupted) return 130;

  std::fprintf(stderr, "convoy_train: evaluating the greedy policy at version %llu on %d episodes\n",
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
  convoy::InitProcess(argc, argv,
                      "convoy_train: trains on this machine: convoy_ps + N agents, then evaluates.\n"
                      "Usage: convoy_train [--minutes=10] [--agents=2] [--name=NAME]");
  struct sigaction action = {};
  action.sa_handler = [](int) { convoy::g_stop = true; };
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  return convoy::Run();
}
