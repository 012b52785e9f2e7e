// convoy_bench_learn: how fast the system learns to drive, for 1, 2 and 4 agents on this machine.
//
// For each agent count it runs a LocalCluster (convoy_ps + N convoy_agent processes on the embedded
// simulator, convoy_train's defaults) for --minutes, and every --eval_every_seconds pulls the
// server's weights and drives the greedy policy over the fixed evaluation seeds. A random policy on
// the same seeds is the baseline. Prints a table per configuration and RESULT key=value lines,
// writes every evaluation to a CSV, and draws it with bench/plot.py (matplotlib) as evaluation
// return against wall-clock minutes and against environment steps; without matplotlib the plot is
// not drawn and the bench says so, with the command that draws it later. The evaluation runs in
// this process on the same cores as the training.
#include <glog/logging.h>
#include <signal.h>
#include <torch/torch.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "agent/environment/environment.h"
#include "agent/environment/preprocess.h"
#include "agent/environment/scenario_settings.h"
#include "agent/evaluation/eval_statistics.h"
#include "agent/evaluation/evaluation.h"
#include "agent/learning/learner.h"
#include "common/model/torch_compat.h"  // After LibTorch: glog's LOG.
#include "common/settings/agent_settings.h"
#include "common/settings/flag_ranges.h"
#include "common/settings/launcher_run_settings.h"
#include "common/support/init.h"
#include "common/support/line_plot.h"
#include "common/support/shell_line.h"
#include "common/support/status_macros.h"
#include "deploy/local/hand_over.h"
#include "deploy/local/local_cluster.h"
#include "deploy/local/training_run.h"

ABSL_FLAG(std::string, agents, "1,2,4", "Agent counts to measure, comma-separated, one run each.");
ABSL_FLAG(double, minutes, 8, "Training time per configuration.");
ABSL_FLAG(double, eval_every_seconds, 60, "Wall-clock seconds between evaluations during a run.");
ABSL_FLAG(int, eval_episodes, 20,
          "Episodes per evaluation during a run (the first of the fixed seeds); each point of the "
          "curves carries its 95% interval.");
ABSL_FLAG(int, final_eval_episodes, 20, "Episodes of the evaluation at the end of each run.");
ABSL_FLAG(std::string, model, convoy::deploy::LocalClusterOptions{}.model,
          "Q-network (registry name).");
ABSL_FLAG(uint64_t, seed, convoy::deploy::LocalClusterOptions{}.seed,
          "Seed; agent i uses seed + i.");
ABSL_FLAG(std::string, runs_dir, "runs", "Directory of runs.");
ABSL_FLAG(std::string, name, "",
          "Run name (default: bench-learn-<date>-<time>); agents-N/ beneath it.");
ABSL_FLAG(
    double, threshold, 0.5,
    "The mean driving score (route completion x CARLA's penalty, evaluation seeds) that counts "
    "as learned: each run reports the minutes, environment steps and train steps to its "
    "first evaluation at or above it.");
ABSL_FLAG(std::string, plot, "learning_curves.png",
          "The learning curves' plot, drawn by --plot_script: .png, .svg or .pdf.");
ABSL_FLAG(std::string, csv, "",
          "CSV of every evaluation, the plot's data (default: --plot with the extension .csv).");
ABSL_FLAG(std::string, python, convoy::kPlotPython,
          "Python with Debian's python3-matplotlib, to draw the plot.");
ABSL_FLAG(std::string, plot_script, CONVOY_PLOT_SCRIPT, "Draws the plot from the CSV.");
// Training settings: both tables', as convoy_train takes them.
// The run settings of the table (common/settings/run_settings.h): --batch_size, --n_step, --gamma, ...
CONVOY_RUN_SETTINGS(CONVOY_LAUNCHER_RUN_SETTING_FLAG)
// Each agent's own settings (common/settings/agent_settings.h): --device, --replay_memory_size, ...
CONVOY_AGENT_SETTINGS(CONVOY_LAUNCHER_AGENT_SETTING_FLAG)
ABSL_FLAG(double, preempt_after_minutes, 0,
          "Preempt every agent this far into each run (SIGTERM, or --preempt_signal) and start it "
          "again for the rest, as a cluster's scheduler would: with --replay_checkpoints it "
          "resumes with its replay memory, without them it starts empty. 0: no preemption.");
ABSL_FLAG(uint64_t, preempt_after_steps, 0,
          "Or once the agents have driven this many environment steps each on average (0: not by "
          "steps).");
ABSL_FLAG(uint64_t, steps_per_agent, 0,
          "Each agent stops after this many environment steps in all, restarts included (0: no "
          "bound; --minutes still ends the run): runs of one length whatever else the machine "
          "does meanwhile.");
ABSL_FLAG(std::string, preempt_signal, "TERM", "TERM (the agents save first) or KILL.");
ABSL_FLAG(
    bool, replay_checkpoints, false,
    "Agents keep replay checkpoints in the run directory (convoy_train --replay_checkpoints).");
ABSL_FLAG(uint32_t, max_pushes_per_step, 0,
          "convoy_ps --max_pushes_per_step (pushes one optimizer step may combine); 0: the "
          "server's default.");
ABSL_FLAG(uint64_t, average_horizon, convoy::deploy::LocalClusterOptions{}.average_horizon,
          "The server's averaged network's horizon, applied minibatches; evaluated at the end of "
          "each run beside the last weights (0: off).");

// The settings this binary shares with others, as flags (common/support/settings_table.h).
CONVOY_SETTINGS_FLAGS(CONVOY_SCENARIO_SETTINGS, convoy::agent::ScenarioSettings,
                      ScenarioSettingsFromFlags)

namespace convoy::bench {
namespace {

std::atomic<bool> g_stop{false};

CONVOY_LAUNCHER_SETTINGS_FROM_FLAGS()

struct EvalPoint {
  double wall_seconds = 0;  // Since the agents started.
  double env_steps = 0;     // All agents together.
  double train_steps = 0;   // All agents together (minibatches).
  uint64_t version = 0;     // The server's weight version evaluated.
  double eval_seconds = 0;  // How long the evaluation itself took.
  agent::EvalSummary summary;
};

struct RunResult {
  int agents = 0;
  std::vector<EvalPoint> points;  // The last one is the final evaluation.
  EvalPoint best;  // The best validated weights (maybe the last), on the final evaluation's seeds.
  std::optional<EvalPoint> average;  // The averaged network at the end, on the same seeds.
  double training_seconds = 0;       // Agents started to the last agent stopped.
  double env_steps = 0, train_steps = 0;
  double eval_seconds = 0;  // Spent evaluating during the run (competing with training).
  int failed_agents = 0;
  // The server's (shard 0's) pushes applied and optimizer steps over the run.
  uint64_t pushes_applied = 0, apply_steps = 0;
};

bool Majority(const agent::EvalSummary& s) {
  return 2 * s.full_episodes > static_cast<int>(s.episodes.size());
}

// Minutes to the first evaluation where more than half the episodes reached the time limit, or -1.
double MinutesToFullMajority(const RunResult& r) {
  for (const EvalPoint& p : r.points) {
    if (Majority(p.summary)) return p.wall_seconds / 60;
  }
  return -1;
}

double MeanDrivingScore(const agent::EvalSummary& s) {
  return agent::StatisticsOf(s).driving_score.estimate;
}

// The first evaluation whose mean driving score reaches --threshold, or null.
const EvalPoint* FirstAtThreshold(const RunResult& r) {
  for (const EvalPoint& p : r.points) {
    if (MeanDrivingScore(p.summary) >= absl::GetFlag(FLAGS_threshold)) return &p;
  }
  return nullptr;
}

void PrintPoint(int agents, const EvalPoint& p) {
  std::fprintf(
      stderr,
      "[%d agents %5.1f min] v%llu %.0f env steps %.0f train steps: return %.1f, distance %.0f m, "
      "full %d/%d, collisions %d (eval %.1f s)\n",
      agents, p.wall_seconds / 60, static_cast<unsigned long long>(p.version), p.env_steps,
      p.train_steps, p.summary.mean_return, p.summary.mean_distance_m, p.summary.full_episodes,
      static_cast<int>(p.summary.episodes.size()), p.summary.collisions, p.eval_seconds);
}

// The bench's hand-over: the averaged network is evaluated beside the best validated weights, not
// chosen, and the validations during the run decide (no settling), each on the shared evaluator.
struct BenchHandOver {
  deploy::HandOverResult result;
  double last_eval_seconds = 0;  // The last weights' evaluation.
};
absl::StatusOr<BenchHandOver> HandOverOfBench(agent::BestPolicy& best, const deploy::RunEnd& end,
                                              agent::GreedyEvaluator& evaluator) {
  deploy::HandOverOptions options;
  options.average_competes = false;
  options.settle_episodes = 0;
  BenchHandOver handed;
  const int episodes = absl::GetFlag(FLAGS_final_eval_episodes);
  CONVOY_ASSIGN_OR_RETURN(
      handed.result,
      deploy::HandOver(
          &best, end, options,
          [&](deploy::HandOverCandidate which,
              const std::vector<float>& weights) -> absl::StatusOr<agent::EvalSummary> {
            const absl::Time start = absl::Now();
            absl::StatusOr<agent::EvalSummary> summary = evaluator.Greedy(weights, episodes);
            if (which == deploy::HandOverCandidate::kLast) {
              handed.last_eval_seconds = absl::ToDoubleSeconds(absl::Now() - start);
            }
            return summary;
          }));
  return handed;
}

// A validation during the run as the bench's table and CSV show it.
EvalPoint PointOf(const deploy::ValidationPoint& v) {
  EvalPoint point;
  point.wall_seconds = v.wall_seconds;
  point.env_steps = v.env_steps;
  point.train_steps = v.train_steps;
  point.version = v.version;
  point.eval_seconds = v.eval_seconds;
  point.summary = v.summary;
  return point;
}

// Prints each validation as it comes.
class PointPrinter final : public deploy::TrainingRunObserver {
 public:
  explicit PointPrinter(int agents) : agents_(agents) {}
  void OnValidation(const deploy::ValidationPoint& point, const agent::BestPolicy&) override {
    PrintPoint(agents_, PointOf(point));
  }

 private:
  const int agents_;
};

absl::StatusOr<RunResult> RunConfiguration(int agents, const std::string& run_dir,
                                           agent::GreedyEvaluator& evaluator) {
  deploy::TrainingRunOptions run;
  deploy::LocalClusterOptions& options = run.cluster;
  options.run_dir = run_dir;
  options.agents = agents;
  options.model = absl::GetFlag(FLAGS_model);
  options.seed = absl::GetFlag(FLAGS_seed);
  options.scenario = ScenarioSettingsFromFlags().scenario;
  options.max_epoch_runtime_sec = ScenarioSettingsFromFlags().max_epoch_runtime_sec;
  options.max_time = absl::Seconds(absl::GetFlag(FLAGS_minutes) * 60);
  static_cast<RunSettings&>(options) = RunSettingsFromFlags();
  static_cast<AgentSettings&>(options) = AgentSettingsFromFlags();
  options.average_horizon = absl::GetFlag(FLAGS_average_horizon);
  options.max_pushes_per_step = absl::GetFlag(FLAGS_max_pushes_per_step);
  options.replay_checkpoints = absl::GetFlag(FLAGS_replay_checkpoints);
  run.preempt_agents_after = absl::Seconds(absl::GetFlag(FLAGS_preempt_after_minutes) * 60);
  run.preempt_agents_after_steps = absl::GetFlag(FLAGS_preempt_after_steps);
  options.max_steps_per_agent = absl::GetFlag(FLAGS_steps_per_agent);
  run.preempt_signal = absl::GetFlag(FLAGS_preempt_signal) == "KILL" ? SIGKILL : SIGTERM;
  CONVOY_RETURN_IF_ERROR(agent::UseScenarioSettings(ScenarioSettingsFromFlags(), &run.spec));
  run.validate_every = absl::Seconds(absl::GetFlag(FLAGS_eval_every_seconds));
  run.validation_episodes = absl::GetFlag(FLAGS_eval_episodes);
  run.best_weights_path = run_dir + "/best_weights.pt";
  PointPrinter printer(agents);
  CONVOY_ASSIGN_OR_RETURN(std::unique_ptr<deploy::TrainingRun> training,
                          deploy::TrainingRun::Start(run, &printer));
  std::fprintf(stderr, "convoy_bench_learn: %d agents for %.1f minutes, logs in %s\n", agents,
               absl::GetFlag(FLAGS_minutes), run_dir.c_str());

  RunResult result;
  result.agents = agents;
  training->Train(g_stop);
  for (const deploy::ValidationPoint& v : training->curve()) {
    result.points.push_back(PointOf(v));
    result.eval_seconds += v.eval_seconds;
  }
  result.training_seconds = training->training_seconds();
  result.failed_agents = training->failed_agents();
  const deploy::ClusterTotals totals = training->cluster().Totals();
  result.env_steps = totals.env_steps;
  result.train_steps = totals.train_steps;
  const int final_episodes = absl::GetFlag(FLAGS_final_eval_episodes);
  if (absl::StatusOr<v1::StatusResponse> status = training->cluster().PsStatus(); status.ok()) {
    result.pushes_applied = status->updates_applied();
    result.apply_steps = status->apply_steps();
  }
  CONVOY_ASSIGN_OR_RETURN(const deploy::RunEnd end, training->Finish());
  if (training->interrupted()) return absl::CancelledError("interrupted");
  agent::BestPolicy& best = *training->best();  // --eval_every_seconds > 0: validation is on.
  CONVOY_ASSIGN_OR_RETURN(BenchHandOver handed, HandOverOfBench(best, end, evaluator));
  // The final weights are those at the end of training, not at the end of the evaluation.
  EvalPoint final_point;
  final_point.wall_seconds = result.training_seconds;
  final_point.env_steps = result.env_steps;
  final_point.train_steps = result.train_steps;
  final_point.version = end.last_version;
  final_point.eval_seconds = handed.last_eval_seconds;
  final_point.summary = handed.result.last;
  if (handed.result.average.has_value()) {
    EvalPoint average = final_point;
    average.eval_seconds = 0;
    average.version = *end.average_version;
    average.summary = *handed.result.average;
    std::fprintf(stderr,
                 "[%d agents] the averaged network as of v%llu, on the %d evaluation seeds: return "
                 "%.1f, full %d\n",
                 agents, static_cast<unsigned long long>(average.version), final_episodes,
                 average.summary.mean_return, average.summary.full_episodes);
    result.average = std::move(average);
  }
  PrintPoint(agents, final_point);
  result.best = final_point;
  result.best.version = handed.result.choice.version;
  result.best.summary = handed.result.handed_over;
  for (const EvalPoint& p : result.points) {
    if (handed.result.choice.chose_earlier() && p.version == result.best.version) {
      result.best.wall_seconds = p.wall_seconds;
      result.best.env_steps = p.env_steps;
      result.best.train_steps = p.train_steps;
    }
  }
  std::fprintf(stderr,
               "[%d agents] best validated weights: v%llu, on the %d evaluation seeds return %.1f, "
               "full %d\n",
               agents, static_cast<unsigned long long>(result.best.version), final_episodes,
               result.best.summary.mean_return, result.best.summary.full_episodes);
  result.points.push_back(std::move(final_point));
  return result;
}

void PrintTable(const RunResult& r, const agent::EvalSummary& random) {
  std::printf(
      "\n%d agent%s: %.1f min of training, %.0f env steps (%.1f/s, %.1f/s per agent), %.0f train "
      "steps "
      "(%.2f/s, %.2f/s per agent), %.1f s evaluating during the run\n",
      r.agents, r.agents == 1 ? "" : "s", r.training_seconds / 60, r.env_steps,
      r.env_steps / r.training_seconds, r.env_steps / r.training_seconds / r.agents, r.train_steps,
      r.train_steps / r.training_seconds, r.train_steps / r.training_seconds / r.agents,
      r.eval_seconds);
  std::printf("%8s %10s %11s %9s %11s %13s %8s %10s %8s\n", "minutes", "env steps", "train steps",
              "version", "mean return", "distance (m)", "full", "collisions", "score");
  auto row = [](const char* minutes, double env, double train, const std::string& version,
                const agent::EvalSummary& s) {
    std::printf("%8s %10.0f %11.0f %9s %11.1f %13.1f %5d/%-2d %7d/%-2d %8.3f\n", minutes, env,
                train, version.c_str(), s.mean_return, s.mean_distance_m, s.full_episodes,
                static_cast<int>(s.episodes.size()), s.collisions,
                static_cast<int>(s.episodes.size()), MeanDrivingScore(s));
  };
  for (size_t i = 0; i < r.points.size(); ++i) {
    const EvalPoint& p = r.points[i];
    const std::string minutes =
        absl::StrFormat("%.1f%s", p.wall_seconds / 60, i + 1 == r.points.size() ? "*" : "");
    row(minutes.c_str(), p.env_steps, p.train_steps, absl::StrCat(p.version), p.summary);
  }
  const std::string best_minutes = absl::StrFormat("best %.1f", r.best.wall_seconds / 60);
  row(best_minutes.c_str(), r.best.env_steps, r.best.train_steps, absl::StrCat(r.best.version),
      r.best.summary);
  if (r.average.has_value()) {
    row("average", r.average->env_steps, r.average->train_steps, absl::StrCat(r.average->version),
        r.average->summary);
  }
  row("random", 0, 0, "-", random);
  std::printf(
      "(* the last weights, \"best\" the best validated ones and \"average\" the averaged network "
      "at the end, on the %d evaluation seeds; the others on %d validation seeds, which choose the "
      "best)\n",
      absl::GetFlag(FLAGS_final_eval_episodes), absl::GetFlag(FLAGS_eval_episodes));
}

void PrintResults(const RunResult& r) {
  const agent::EvalSummary& last = r.points.back().summary;
  const int n = r.agents;
  std::printf("RESULT final_return_agents_%d=%.3f\n", n, last.mean_return);
  std::printf("RESULT final_distance_m_agents_%d=%.2f\n", n, last.mean_distance_m);
  std::printf("RESULT full_episodes_agents_%d=%d\n", n, last.full_episodes);
  std::printf("RESULT collisions_agents_%d=%d\n", n, last.collisions);
  std::printf("RESULT minutes_to_full_majority_agents_%d=%.2f\n", n, MinutesToFullMajority(r));
  std::printf("RESULT final_driving_score_agents_%d=%.4f\n", n, MeanDrivingScore(last));
  // The 95% confidence intervals of the last weights' mean return and driving score.
  const agent::EvalStatistics last_stats = agent::StatisticsOf(last);
  std::printf("RESULT final_return_ci_agents_%d=%.3f,%.3f\n", n, last_stats.mean_return.low,
              last_stats.mean_return.high);
  std::printf("RESULT final_driving_score_ci_agents_%d=%.4f,%.4f\n", n,
              last_stats.driving_score.low, last_stats.driving_score.high);
  const EvalPoint* reached = FirstAtThreshold(r);
  std::printf("RESULT minutes_to_threshold_agents_%d=%.2f\n", n,
              reached ? reached->wall_seconds / 60 : -1.0);
  std::printf("RESULT env_steps_to_threshold_agents_%d=%.0f\n", n,
              reached ? reached->env_steps : -1.0);
  std::printf("RESULT train_steps_to_threshold_agents_%d=%.0f\n", n,
              reached ? reached->train_steps : -1.0);
  std::printf("RESULT best_version_agents_%d=%llu\n", n,
              static_cast<unsigned long long>(r.best.version));
  std::printf("RESULT best_return_agents_%d=%.3f\n", n, r.best.summary.mean_return);
  std::printf("RESULT best_distance_m_agents_%d=%.2f\n", n, r.best.summary.mean_distance_m);
  std::printf("RESULT best_full_episodes_agents_%d=%d\n", n, r.best.summary.full_episodes);
  std::printf("RESULT best_collisions_agents_%d=%d\n", n, r.best.summary.collisions);
  if (r.average.has_value()) {
    std::printf("RESULT average_return_agents_%d=%.3f\n", n, r.average->summary.mean_return);
    std::printf("RESULT average_full_episodes_agents_%d=%d\n", n, r.average->summary.full_episodes);
    std::printf("RESULT average_collisions_agents_%d=%d\n", n, r.average->summary.collisions);
  }
  std::printf("RESULT env_steps_agents_%d=%.0f\n", n, r.env_steps);
  std::printf("RESULT train_steps_agents_%d=%.0f\n", n, r.train_steps);
  std::printf("RESULT env_steps_per_s_agents_%d=%.2f\n", n, r.env_steps / r.training_seconds);
  std::printf("RESULT pushes_applied_per_s_agents_%d=%.2f\n", n,
              static_cast<double>(r.pushes_applied) / r.training_seconds);
  std::printf("RESULT pushes_per_step_agents_%d=%.3f\n", n,
              r.apply_steps > 0 ? static_cast<double>(r.pushes_applied) / r.apply_steps : 0.0);
  std::printf("RESULT env_steps_per_s_per_agent_agents_%d=%.2f\n", n,
              r.env_steps / r.training_seconds / n);
  std::printf("RESULT train_steps_per_s_agents_%d=%.3f\n", n, r.train_steps / r.training_seconds);
  std::printf("RESULT train_steps_per_s_per_agent_agents_%d=%.3f\n", n,
              r.train_steps / r.training_seconds / n);
}

std::string SeriesName(int agents) {
  return absl::StrCat(agents, agents == 1 ? " agent" : " agents");
}

// One row per evaluation: the series (agent count, or "random" and "expert" for the baselines,
// which have no time or steps), when it ran and what it measured, its driving score with the 95%
// interval last.
absl::Status WriteCsv(const std::string& path, const std::vector<RunResult>& runs,
                      const agent::EvalSummary& random, const agent::EvalSummary& expert) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) return absl::UnavailableError(absl::StrCat("cannot write ", path));
  std::fprintf(f,
               "series,agents,wall_minutes,env_steps,train_steps,version,mean_return,"
               "mean_distance_m,full_episodes,episodes,collisions,driving_score,"
               "driving_score_ci_low,driving_score_ci_high\n");
  auto summary = [](const agent::EvalSummary& s) {
    const agent::Interval score = agent::StatisticsOf(s).driving_score;
    return absl::StrFormat("%.3f,%.2f,%d,%d,%d,%.4f,%.4f,%.4f", s.mean_return, s.mean_distance_m,
                           s.full_episodes, static_cast<int>(s.episodes.size()), s.collisions,
                           score.estimate, score.low, score.high);
  };
  for (const RunResult& r : runs) {
    for (const EvalPoint& p : r.points) {
      std::fprintf(f, "%s,%d,%.3f,%.0f,%.0f,%llu,%s\n", SeriesName(r.agents).c_str(), r.agents,
                   p.wall_seconds / 60, p.env_steps, p.train_steps,
                   static_cast<unsigned long long>(p.version), summary(p.summary).c_str());
    }
  }
  std::fprintf(f, "random,0,,,,,%s\n", summary(random).c_str());
  std::fprintf(f, "expert,0,,,,,%s\n", summary(expert).c_str());
  if (std::fclose(f) != 0) return absl::UnavailableError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

// The command that draws --plot from the CSV.
std::vector<std::string> PlotCommand(const std::string& csv, const std::string& plot) {
  LinePlot figure;
  figure.csv = csv;
  figure.output = plot;
  figure.series = "series";
  figure.y = "driving_score=driving score";
  figure.band = "driving_score_ci_low,driving_score_ci_high";
  figure.x = {"wall_minutes=wall-clock minutes", "env_steps=env steps, all agents"};
  figure.hlines = {"random", "expert"};
  figure.y_from_zero = true;
  figure.title = "convoy_bench_learn: evaluation driving score (95% CI)";
  return LinePlotCommand(absl::GetFlag(FLAGS_python), absl::GetFlag(FLAGS_plot_script), figure);
}

int Run() {
  // Every numeric flag but --seed, which takes any value.
  std::vector<FlagRange> ranges = SettingRanges(RunSettingsFromFlags(), AgentSettingsFromFlags());
  const std::vector<FlagRange> others = {
      RealRange("minutes", absl::GetFlag(FLAGS_minutes), 0, kNoRealMax, Ends::kOpenMin),
      RealRange("eval_every_seconds", absl::GetFlag(FLAGS_eval_every_seconds), 0, kNoRealMax,
                Ends::kOpenMin),
      IntRange("eval_episodes", absl::GetFlag(FLAGS_eval_episodes), 1, 100000),
      IntRange("final_eval_episodes", absl::GetFlag(FLAGS_final_eval_episodes), 1, 100000),
      UintRange("average_horizon", absl::GetFlag(FLAGS_average_horizon), 0, kNoUintMax),
      RealRange("preempt_after_minutes", absl::GetFlag(FLAGS_preempt_after_minutes), 0,
                absl::GetFlag(FLAGS_minutes), Ends::kOpenMax)};
  ranges.insert(ranges.end(), others.begin(), others.end());
  if (!FlagsInRange("convoy_bench_learn", ranges)) return kExitUsage;
  if (const std::string signal = absl::GetFlag(FLAGS_preempt_signal);
      signal != "TERM" && signal != "KILL") {
    std::fprintf(stderr, "--preempt_signal: '%s' is neither TERM nor KILL\n", signal.c_str());
    return kExitUsage;
  }
  std::vector<int> counts;
  for (absl::string_view field :
       absl::StrSplit(absl::GetFlag(FLAGS_agents), ',', absl::SkipEmpty())) {
    int n = 0;
    if (!absl::SimpleAtoi(field, &n) || n < 1) {
      std::fprintf(stderr, "--agents: '%s' is not a positive count\n", std::string(field).c_str());
      return 2;
    }
    counts.push_back(n);
  }
  // Batch-1 inference needs no intra-op parallelism, and the agents need the cores.
  torch::set_num_threads(1);
  agent::EnvironmentSpec spec;
  if (absl::Status s = agent::UseScenarioSettings(ScenarioSettingsFromFlags(), &spec); !s.ok()) {
    std::fprintf(stderr, "convoy_bench_learn: %s\n", std::string(s.message()).c_str());
    return kExitUsage;
  }
  absl::StatusOr<std::unique_ptr<agent::GreedyEvaluator>> evaluator =
      agent::GreedyEvaluator::Create(absl::GetFlag(FLAGS_model), spec);
  if (!evaluator.ok()) {
    LOG(ERROR) << evaluator.status();
    return 1;
  }
  const int final_episodes = absl::GetFlag(FLAGS_final_eval_episodes);
  absl::StatusOr<agent::EvalSummary> random = (*evaluator)->Random(final_episodes);
  if (!random.ok()) {
    LOG(ERROR) << "random policy: " << random.status();
    return 1;
  }
  std::fprintf(stderr, "convoy_bench_learn: random policy on %d seeds: return %.1f, full %d/%d\n",
               final_episodes, random->mean_return, random->full_episodes, final_episodes);
  absl::StatusOr<agent::EvalSummary> expert = (*evaluator)->Expert(final_episodes);
  if (!expert.ok()) {
    LOG(ERROR) << "scripted expert: " << expert.status();
    return 1;
  }

  std::string name = absl::GetFlag(FLAGS_name);
  if (name.empty())
    name = absl::FormatTime("bench-learn-%Y%m%d-%H%M%S", absl::Now(), absl::LocalTimeZone());
  std::vector<RunResult> runs;
  for (int n : counts) {
    const std::string run_dir =
        absl::StrCat(absl::GetFlag(FLAGS_runs_dir), "/", name, "/agents-", n);
    absl::StatusOr<RunResult> run = RunConfiguration(n, run_dir, **evaluator);
    if (!run.ok()) {
      LOG(ERROR) << n << " agents: " << run.status();
      return g_stop.load() ? 130 : 1;
    }
    PrintTable(*run, *random);
    std::fflush(stdout);
    runs.push_back(*std::move(run));
  }

  std::printf("\nscenario %s; learned: a mean driving score of %.2f on the validation seeds\n",
              spec.scenario.c_str(), absl::GetFlag(FLAGS_threshold));
  std::printf("%7s %20s %22s %24s %21s\n", "agents", "minutes to learned", "env steps to learned",
              "train steps to learned", "final driving score");
  for (const RunResult& r : runs) {
    const EvalPoint* reached = FirstAtThreshold(r);
    const std::string never = "not reached";
    std::printf(
        "%7d %20s %22s %24s %21.3f\n", r.agents,
        reached ? absl::StrFormat("%.1f", reached->wall_seconds / 60).c_str() : never.c_str(),
        reached ? absl::StrFormat("%.0f", reached->env_steps).c_str() : never.c_str(),
        reached ? absl::StrFormat("%.0f", reached->train_steps).c_str() : never.c_str(),
        MeanDrivingScore(r.points.back().summary));
  }
  std::printf("\n");
  for (const RunResult& r : runs) PrintResults(r);
  std::printf("RESULT random_return=%.3f\n", random->mean_return);
  std::printf("RESULT random_distance_m=%.2f\n", random->mean_distance_m);
  std::printf("RESULT random_full_episodes=%d\n", random->full_episodes);
  std::printf("RESULT random_driving_score=%.4f\n", MeanDrivingScore(*random));
  std::printf("RESULT expert_driving_score=%.4f\n", MeanDrivingScore(*expert));
  std::printf("RESULT eval_episodes=%d\n", final_episodes);
  const std::string plot = absl::GetFlag(FLAGS_plot);
  std::string csv = absl::GetFlag(FLAGS_csv);
  if (csv.empty()) {
    const size_t dot = plot.rfind('.');
    const size_t slash = plot.rfind('/');
    const bool has_extension =
        dot != std::string::npos && (slash == std::string::npos || dot > slash);
    csv = absl::StrCat(has_extension ? plot.substr(0, dot) : plot, ".csv");
  }
  if (absl::Status s = WriteCsv(csv, runs, *random, *expert); !s.ok()) {
    LOG(ERROR) << "curves: " << s;
    return 1;
  }
  std::printf("curves: %s\n", csv.c_str());
  const std::vector<std::string> command = PlotCommand(csv, plot);
  std::fflush(stdout);
  if (absl::Status s = DrawLinePlot(command); s.ok()) {
    std::printf("plot: %s\n", plot.c_str());
  } else {
    // The results stand without the figure: say so, and how to draw it later.
    std::printf("plot: not drawn (%s); with python3-matplotlib installed, draw it with\n  %s\n",
                std::string(s.message()).c_str(), ShellLine(command).c_str());
  }
  int failed = 0;
  for (const RunResult& r : runs) failed += r.failed_agents;
  return failed == 0 ? 0 : 1;
}

}  // namespace
}  // namespace convoy::bench

int main(int argc, char** argv) {
  convoy::InitProcess(
      argc, argv,
      "convoy_bench_learn: evaluation return against time and env steps for 1, 2, 4 agents.\n"
      "Usage: convoy_bench_learn [--agents=1,2,4] [--minutes=8] [--plot=learning_curves.png]\n"
      "The plot is drawn with matplotlib (Debian's python3-matplotlib) by bench/plot.py.");
  struct sigaction action = {};
  action.sa_handler = [](int) { convoy::bench::g_stop = true; };
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  return convoy::bench::Run();
}
