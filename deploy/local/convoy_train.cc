// convoy_train: the one-machine training run. Starts convoy_ps and N convoy_agent processes (found
// beside this binary) on the embedded simulator, trains for a bounded time printing one merged
// progress line, then evaluates the greedy policy on fixed-seed episodes beside a random policy and
// prints the table and RESULT lines. Checkpoints and logs go under runs/<name>/. At its start it
// prints the command that watches the run live (convoy_status given the run directory) and where
// TensorBoard finds the agents' scalars; at its end the run directory holds its learning curve, the
// validations against minutes beside the random policy, as learning_curve.csv and, drawn by
// bench/plot.py as convoy_bench_learn draws its curves, learning_curve.png. Ctrl-C stops every
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
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "agent/environment/scenario_settings.h"
#include "agent/evaluation/episode_video.h"
#include "agent/evaluation/eval_statistics.h"
#include "agent/evaluation/evaluation.h"
#include "agent/evaluation/map_image.h"
#include "common/model/model_registry.h"
#include "common/model/weights_file.h"
#include "common/settings/agent_settings.h"
#include "common/settings/flag_ranges.h"
#include "common/settings/launcher_run_settings.h"
#include "common/settings/process_settings.h"
#include "common/support/init.h"
#include "common/support/line_plot.h"
#include "common/support/local_run_files.h"
#include "common/support/settings_table.h"
#include "common/support/shell_line.h"
#include "common/support/status_macros.h"
#include "common/support/time_split.h"
#include "deploy/local/hand_over.h"
#include "deploy/local/local_cluster.h"
#include "deploy/local/training_run.h"

// convoy_train's own flags, a row each (common/support/settings_table.h); the settings other
// binaries take too are written through common/settings/process_settings.h.
#define CONVOY_TRAIN_SETTINGS(X)                                                                   \
  X(double, minutes, 10, "Training time.")                                                         \
  X(uint64_t, steps_per_agent, 0,                                                                  \
    "Also stop each agent after this many environment steps (0: time only). Bounds a run by work " \
    "rather than by the machine's speed.")                                                         \
  X(int, agents, 2, "Agent processes.")                                                            \
  X(int, ps_shards, convoy::deploy::LocalClusterOptions{}.ps_shards,                               \
    "convoy_ps processes, each serving one shard of the model's parameters.")                      \
  X(std::string, name, "",                                                                         \
    "Run name (default: train-<date>-<time>); files go to <runs_dir>/<name>.")                     \
  X(std::string, runs_dir, "runs", "Directory of runs.")                                           \
  CONVOY_PROCESS_SETTING(                                                                          \
      X, resume, false,                                                                            \
      "Continue the run --name from its last checkpoint (and with --replay_checkpoints each "      \
      "agent from its replay checkpoint). Without it, a --name whose run has checkpoints is "      \
      "refused (exit 2).")                                                                         \
  X(bool, replay_checkpoints, false,                                                               \
    "Each agent saves its replay memory and state to <run>/replay/agent-<i>.replay "               \
    "(convoy_agent --replay_checkpoint_dir; every --replay_checkpoint_every and at its end), "     \
    "so that --resume brings the agents back with them: some 84 MB an agent at the default "       \
    "--replay_memory_size.")                                                                       \
  CONVOY_PROCESS_SETTING(X, model, convoy::deploy::LocalClusterOptions{}.model,                    \
                         "Q-network (registry name).")                                             \
  CONVOY_PROCESS_SETTING(X, seed, convoy::deploy::LocalClusterOptions{}.seed,                      \
                         "Seed; agent i uses seed + i.")                                           \
  X(int, eval_episodes, 100,                                                                       \
    "Evaluation episodes at the end, on fixed seeds held out from training and validation: "       \
    "every rate and mean comes with its 95% confidence interval (20 are a quick check).")          \
  CONVOY_PROCESS_SETTING_UNLESS_GIVEN(                                                             \
      X, average_horizon,                                                                          \
      "The server's averaged network: the online weights averaged exponentially over this many "   \
      "applied minibatches, a candidate of the hand-over, evaluated at the end (0: off). "         \
      "Default: 300 per minute of --minutes (3000 for 10 minutes).")                               \
  CONVOY_PROCESS_SETTING(X, report_seconds, 5, "Seconds between merged progress lines.")           \
  X(bool, metrics, false,                                                                          \
    "Every process serves Prometheus metrics on 127.0.0.1 (a free port each), listed for "         \
    "Prometheus' file_sd in <run>/prometheus_targets.json (docs/deploy.md, \"Monitoring\").")      \
  X(double, validate_every_seconds, 60,                                                            \
    "Seconds between validations of the server's weights, which keep the best policy of the run "  \
    "(0: hand over the last weights).")                                                            \
  X(int, validation_episodes, 20,                                                                  \
    "Episodes per validation, on seeds disjoint from the final evaluation's: each point of "       \
    "the learning curve, with its 95% interval.")                                                  \
  X(int, final_validation_episodes, 50,                                                            \
    "When the agents have stopped, the 3 best validated versions, the last and the averaged "      \
    "network are driven over this many more validation seeds, and the run hands over the best of " \
    "them on those seeds alone, which flatter none of them (0: the validations during the run "    \
    "decide).")
CONVOY_TRAIN_SETTINGS(CONVOY_SETTING_FLAG)
// Each agent's own settings (common/settings/agent_settings.h): --device, --replay_memory_size, ...
CONVOY_AGENT_SETTINGS(CONVOY_LAUNCHER_AGENT_SETTING_FLAG)
// The run settings of the table (common/settings/run_settings.h): --batch_size, --n_step, --gamma,
// ...
CONVOY_RUN_SETTINGS(CONVOY_LAUNCHER_RUN_SETTING_FLAG)

// The settings this binary shares with others, as flags (common/support/settings_table.h).
CONVOY_SETTINGS_FLAGS(CONVOY_SCENARIO_SETTINGS, convoy::agent::ScenarioSettings,
                      ScenarioSettingsFromFlags)

namespace convoy::deploy {
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

// A row per validation (series "validation"): its driving score with the 95% interval, the field's
// metric, beside its mean return and completed episodes; then the random policy's and the scripted
// expert's rows on the same seeds (series "random" and "expert", which have no time, steps or
// version). What plot.py draws.
absl::Status WriteCurveCsv(const std::string& path, const std::vector<ValidationPoint>& points,
                           const agent::EvalSummary& random, const agent::EvalSummary& expert) {
  std::string csv =
      "series,minutes,env_steps,version,driving_score,driving_score_ci_low,driving_score_ci_high,"
      "mean_return,full_episodes,episodes\n";
  auto row = [&csv](const char* series, const std::string& when,
                    const agent::EvalSummary& summary) {
    const agent::Interval score = agent::StatisticsOf(summary).driving_score;
    absl::StrAppendFormat(&csv, "%s,%s,%.4f,%.4f,%.4f,%.3f,%d,%d\n", series, when, score.estimate,
                          score.low, score.high, summary.mean_return, summary.full_episodes,
                          static_cast<int>(summary.episodes.size()));
  };
  for (const ValidationPoint& p : points) {
    row("validation",
        absl::StrFormat("%.3f,%.0f,%llu", p.wall_seconds / 60, p.env_steps,
                        static_cast<unsigned long long>(p.version)),
        p.summary);
  }
  row("random", ",,", random);
  row("expert", ",,", expert);
  std::ofstream out(path, std::ios::trunc);
  out << csv;
  out.close();
  if (!out) return absl::UnavailableError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

// Leaves the learning curve in the run directory: learning_curve.csv, and learning_curve.png drawn
// from it by bench/plot.py the way convoy_bench_learn draws its curves: the validations' driving
// score with its interval against minutes, the random policy and the expert as lines. Returns the
// lines that say where it is. Without matplotlib (or plot.py) the CSV stays and the line says why
// the picture is missing; a missing picture never fails the run.
std::string LeaveLearningCurve(const std::string& run, const std::string& name,
                               const std::vector<ValidationPoint>& points,
                               agent::BestPolicy& best) {
  absl::StatusOr<agent::EvalSummary> random = best.RandomBaseline();
  if (!random.ok()) return absl::StrCat("learning curve: not written: ", random.status().message());
  absl::StatusOr<agent::EvalSummary> expert = best.ExpertBaseline();
  if (!expert.ok()) return absl::StrCat("learning curve: not written: ", expert.status().message());
  const std::string baselines = absl::StrFormat(
      "on the %zu validation seeds, driving score: the random policy %.3f, the scripted expert "
      "%.3f\n",
      random->episodes.size(), agent::StatisticsOf(*random).driving_score.estimate,
      agent::StatisticsOf(*expert).driving_score.estimate);
  const std::string csv = run + "/learning_curve.csv";
  if (absl::Status s = WriteCurveCsv(csv, points, *random, *expert); !s.ok()) {
    return absl::StrCat(baselines, "learning curve: not written: ", s.message());
  }
  absl::StatusOr<std::string> script = FindPlotScript(CONVOY_PLOT_SCRIPT);
  if (!script.ok()) {
    return absl::StrCat(baselines, "learning curve: ", csv,
                        "; not drawn: ", script.status().message());
  }
  LinePlot figure;
  figure.csv = csv;
  figure.output = run + "/learning_curve.png";
  figure.series = "series";
  figure.y = "driving_score=driving score (95% CI)";
  figure.band = "driving_score_ci_low,driving_score_ci_high";
  figure.x = {"minutes=minutes of training"};
  figure.hlines = {"random", "expert"};
  figure.y_from_zero = true;
  figure.title = absl::StrCat("convoy_train ", name, ": validations");
  const std::vector<std::string> command = LinePlotCommand(kPlotPython, *script, figure);
  // plot.py's own message would be a second line saying the same: the one returned says it all.
  if (absl::Status s = DrawLinePlot(command, "/dev/null"); !s.ok()) {
    return absl::StrCat(
        baselines, "learning curve: ", csv, "; not drawn (", s.message(),
        s.code() == absl::StatusCode::kFailedPrecondition ? "; Debian: python3-matplotlib" : "",
        "), draw it with: ", ShellLine(command));
  }
  return absl::StrCat(baselines, "learning curve: ", figure.output, " (its data: ", csv, ")");
}

CONVOY_LAUNCHER_SETTINGS_FROM_FLAGS()

// Every numeric flag but --seed and --steps_per_agent, which take any value. Checked before the run
// directory is made or a process started.
bool NumericFlagsInRange() {
  std::vector<FlagRange> ranges = SettingRanges(RunSettingsFromFlags(), AgentSettingsFromFlags());
  const std::vector<FlagRange> others = {
      RealRange("minutes", absl::GetFlag(FLAGS_minutes), 0, kNoRealMax, Ends::kOpenMin),
      IntRange("agents", absl::GetFlag(FLAGS_agents), 1, 256),
      IntRange("ps_shards", absl::GetFlag(FLAGS_ps_shards), 1, 64),
      IntRange("eval_episodes", absl::GetFlag(FLAGS_eval_episodes), 1, 100000),
      RealRange("report_seconds", absl::GetFlag(FLAGS_report_seconds), 0, kNoRealMax,
                Ends::kOpenMin),
      RealRange("validate_every_seconds", absl::GetFlag(FLAGS_validate_every_seconds), 0,
                kNoRealMax),
      IntRange("validation_episodes", absl::GetFlag(FLAGS_validation_episodes), 1, 100000),
      IntRange("final_validation_episodes", absl::GetFlag(FLAGS_final_validation_episodes), 0,
               100000)};
  ranges.insert(ranges.end(), others.begin(), others.end());
  return FlagsInRange("convoy_train", ranges);
}

// A training run as convoy_train's steps share it: the directory, the model, the run itself.
struct Launch {
  std::string name;
  std::string run;  // The run directory.
  ModelInfo info;
  agent::EnvironmentSpec spec;
  std::unique_ptr<TrainingRun> training;
};

// What convoy_train prints while the run trains: the merged progress line every report, and once a
// minute where the agents' CPU-seconds went over that minute (common/support/time_split.h).
class Printer final : public TrainingRunObserver {
 public:
  explicit Printer(absl::Duration total) : total_(total) {}
  void OnProgress(const ClusterTotals& totals, size_t agents, absl::Duration elapsed,
                  uint64_t ps_version) override {
    PrintMerged(totals, agents, elapsed, total_, ps_version);
    last_ = totals;
    if (elapsed - split_printed_at_ < kSplitEvery) return;
    const TimeSplit minute = totals.time - split_printed_.time;
    const double wall = totals.wall_seconds - split_printed_.wall_seconds;
    split_printed_ = totals;
    split_printed_at_ = elapsed;
    // An agent restarted in the minute (its counters began again) leaves no sound difference.
    if (wall <= 0 || minute.process_cpu <= 0) return;
    std::fprintf(stderr, "[%5.1f min] agents' CPU: %.2f cores: %s\n",
                 absl::ToDoubleMinutes(elapsed), minute.process_cpu * agents / wall,
                 FormatTimeShares(minute, wall).c_str());
  }
  // The agents' totals at the latest report.
  const ClusterTotals& last() const { return last_; }
  void OnValidation(const ValidationPoint& point, const agent::BestPolicy& best) override {
    std::fprintf(stderr,
                 "convoy_train: validation of v%llu: driving score %.3f, %d/%zu full, return "
                 "%.1f%s (best v%llu: %.3f, %d full)\n",
                 static_cast<unsigned long long>(point.version), point.summary.mean_driving_score,
                 point.summary.full_episodes, point.summary.episodes.size(),
                 point.summary.mean_return, point.best_yet ? ", the best yet" : "",
                 static_cast<unsigned long long>(best.version()), best.summary().mean_driving_score,
                 best.summary().full_episodes);
  }
  void OnStopping() override {
    std::fprintf(stderr, "convoy_train: stopping every process cleanly\n");
  }

 private:
  static constexpr absl::Duration kSplitEvery = absl::Minutes(1);
  const absl::Duration total_;
  ClusterTotals last_;
  ClusterTotals split_printed_;
  absl::Duration split_printed_at_;
};

// The run's directory and model, announced; or the exit code.
std::optional<int> PrepareRun(Launch& t) {
  if (absl::Status s = agent::UseScenarioSettings(ScenarioSettingsFromFlags(), &t.spec); !s.ok()) {
    std::fprintf(stderr, "convoy_train: %s\n", std::string(s.message()).c_str());
    return kExitUsage;
  }
  t.name = absl::GetFlag(FLAGS_name);
  if (t.name.empty())
    t.name = absl::FormatTime("train-%Y%m%d-%H%M%S", absl::Now(), absl::LocalTimeZone());
  t.run = absl::StrCat(absl::GetFlag(FLAGS_runs_dir), "/", t.name);
  std::filesystem::create_directories(t.run);
  const std::string model = absl::GetFlag(FLAGS_model);
  absl::StatusOr<ModelInfo> info = DescribeModel(model);
  if (!info.ok()) {
    LOG(ERROR) << info.status();
    return 2;
  }
  t.info = *std::move(info);
  std::fprintf(stderr,
               "convoy_train: run %s, model %s (%zu parameters), %d agents, %d parameter-server "
               "shard%s, %.1f minutes\n",
               t.run.c_str(), model.c_str(), t.info.parameter_count, absl::GetFlag(FLAGS_agents),
               absl::GetFlag(FLAGS_ps_shards), absl::GetFlag(FLAGS_ps_shards) == 1 ? "" : "s",
               absl::GetFlag(FLAGS_minutes));
  return std::nullopt;
}

// The cluster's options: the flags, the run directory.
LocalClusterOptions ClusterOptions(const std::string& run) {
  const std::string model = absl::GetFlag(FLAGS_model);
  const int num_agents = absl::GetFlag(FLAGS_agents);
  const absl::Duration total = absl::Seconds(absl::GetFlag(FLAGS_minutes) * 60);
  LocalClusterOptions options;
  options.run_dir = run;
  options.agents = num_agents;
  options.model = model;
  options.seed = absl::GetFlag(FLAGS_seed);
  static_cast<RunSettings&>(options) = RunSettingsFromFlags();
  static_cast<AgentSettings&>(options) = AgentSettingsFromFlags();
  options.average_horizon =
      absl::GetFlag(FLAGS_average_horizon).value_or(LocalAverageHorizon(total));
  options.scenario = ScenarioSettingsFromFlags().scenario;
  options.max_epoch_runtime_sec = ScenarioSettingsFromFlags().max_epoch_runtime_sec;
  options.max_time = total;
  options.max_steps_per_agent = absl::GetFlag(FLAGS_steps_per_agent);
  options.report_every = absl::Seconds(absl::GetFlag(FLAGS_report_seconds));
  options.resume = absl::GetFlag(FLAGS_resume);
  options.ps_shards = absl::GetFlag(FLAGS_ps_shards);
  options.metrics = absl::GetFlag(FLAGS_metrics);
  options.replay_checkpoints = absl::GetFlag(FLAGS_replay_checkpoints);
  return options;
}

// Starts convoy_ps and the agents, and the validation that keeps the run's best policy; or the exit
// code.
std::optional<int> StartRun(Launch& t, TrainingRunObserver* printer) {
  TrainingRunOptions options;
  options.cluster = ClusterOptions(t.run);
  options.spec = t.spec;
  options.validate_every = absl::Seconds(absl::GetFlag(FLAGS_validate_every_seconds));
  options.validation_episodes = absl::GetFlag(FLAGS_validation_episodes);
  options.best_weights_path = t.run + "/best/weights.pt";
  options.report_every = options.cluster.report_every;
  absl::StatusOr<std::unique_ptr<TrainingRun>> training = TrainingRun::Start(options, printer);
  if (!training.ok()) {
    if (training.status().code() == absl::StatusCode::kFailedPrecondition) {
      std::fprintf(stderr, "convoy_train: %s\n", std::string(training.status().message()).c_str());
      if (!options.cluster.resume) {
        std::fprintf(stderr,
                     "convoy_train: pass --resume to continue run %s, or choose another --name\n",
                     t.name.c_str());
      }
      return 2;
    }
    LOG(ERROR) << training.status();
    return 1;
  }
  t.training = *std::move(training);
  // Where the best validated weights go; made only once the run started (a refused one leaves no
  // trace).
  std::filesystem::create_directories(t.run + "/best");
  std::fprintf(stderr, "convoy_train: watch it live: %s\n",
               ShellLine({"./convoy", "status", t.run, "--watch"}).c_str());
  if (options.cluster.metrics) {
    std::fprintf(stderr, "convoy_train: Prometheus targets (file_sd): %s\n",
                 LocalRunMetricsTargets(t.run).c_str());
  }
  std::fprintf(stderr, "convoy_train: TensorBoard: %s (each agent's scalars, agent-<i>/)\n",
               ShellLine({"tensorboard", "--logdir", t.run}).c_str());
  return std::nullopt;
}

// The hand-over's evaluation: each policy against a random one on the evaluation seeds, in a fresh
// environment. `random` keeps the random policy's summary for the table, `expert` the scripted
// expert's (driven once: it does not depend on the weights).
EvaluatePolicy EvaluateAgainstRandom(const Launch& t, agent::EvalSummary* random,
                                     agent::EvalSummary* expert) {
  return [&t, random, expert](
             HandOverCandidate,
             const std::vector<float>& weights) -> absl::StatusOr<agent::EvalSummary> {
    const int episodes = absl::GetFlag(FLAGS_eval_episodes);
    CONVOY_ASSIGN_OR_RETURN(
        agent::Comparison comparison,
        agent::CompareWithRandom(t.training->options().cluster.model, weights, t.spec, episodes,
                                 /*with_expert=*/expert->episodes.empty()));
    *random = comparison.random;
    if (expert->episodes.empty()) *expert = comparison.expert;
    return comparison.greedy;
  };
}

// One line per candidate of the hand-over on the evaluation seeds (its driving score with the 95%
// interval), then their RESULT lines: candidate_<last|average|validated>_driving_score and its
// _ci_low, _ci_high and _version.
std::string CandidateLines(const HandOverResult& handed, const RunEnd& end) {
  struct Row {
    const char* key;
    std::string name;
    const agent::EvalSummary* summary;  // Null: the run has no such candidate.
    uint64_t version;
  };
  auto of = [](const std::optional<agent::EvalSummary>& s) {
    return s.has_value() ? &*s : nullptr;
  };
  const std::vector<Row> rows = {
      {"last", "the last weights", &handed.last, end.last_version},
      {"average", "the averaged network", of(handed.average), end.average_version.value_or(0)},
      {"validated", "the best validated", of(handed.validated),
       handed.validated_version.value_or(0)},
  };
  std::string lines = "the candidates on the evaluation seeds (driving score, 95% CI):\n";
  std::string results;
  for (const Row& row : rows) {
    if (row.summary == nullptr) continue;
    const agent::Interval score = agent::StatisticsOf(*row.summary).driving_score;
    absl::StrAppendFormat(&lines, "  %-22s %-8s %.3f [%.3f, %.3f]\n", row.name,
                          absl::StrCat("v", row.version), score.estimate, score.low, score.high);
    absl::StrAppendFormat(&results,
                          "RESULT candidate_%s_driving_score=%.4f\n"
                          "RESULT candidate_%s_driving_score_ci_low=%.4f\n"
                          "RESULT candidate_%s_driving_score_ci_high=%.4f\n"
                          "RESULT candidate_%s_version=%llu\n",
                          row.key, score.estimate, row.key, score.low, row.key, score.high, row.key,
                          static_cast<unsigned long long>(row.version));
  }
  return lines + results;
}

// The table and RESULT lines of the hand-over, as evaluation.txt has them too.
std::string ResultTable(const HandOverResult& handed, const RunEnd& end,
                        const agent::EvalSummary& random, const agent::EvalSummary& expert) {
  std::string table = agent::FormatComparison(handed.handed_over, random, &expert);
  absl::StrAppendFormat(&table,
                        "RESULT policy_version=%llu\nRESULT policy_averaged=%d\n"
                        "RESULT last_version=%llu\n"
                        "RESULT last_mean_return=%.3f\nRESULT last_full_episodes=%d\n",
                        static_cast<unsigned long long>(handed.choice.version),
                        handed.choice.averaged() ? 1 : 0,
                        static_cast<unsigned long long>(end.last_version), handed.last.mean_return,
                        handed.last.full_episodes);
  if (end.average_version.has_value()) {
    absl::StrAppendFormat(&table,
                          "RESULT average_version=%llu\nRESULT average_mean_return=%.3f\n"
                          "RESULT average_full_episodes=%d\n",
                          static_cast<unsigned long long>(*end.average_version),
                          handed.average->mean_return, handed.average->full_episodes);
  }
  return table + CandidateLines(handed, end);
}

// The best and the worst evaluation episode of the handed-over policy as videos in the run's
// videos/, which TensorBoard shows too. A failure is reported, not fatal: the evaluation stands
// without them.
void WriteVideos(const Launch& t, const HandOverResult& handed) {
  const std::string dir = t.run + "/videos";
  absl::StatusOr<std::unique_ptr<agent::GreedyEvaluator>> evaluator =
      agent::GreedyEvaluator::Create(t.training->options().cluster.model, t.spec);
  absl::StatusOr<std::unique_ptr<EventFileWriter>> events =
      evaluator.ok() ? EventFileWriter::Create(dir) : evaluator.status();
  absl::StatusOr<std::vector<agent::EpisodeVideo>> videos =
      events.ok()
          ? agent::WriteEvaluationVideos(**evaluator, handed.weights, handed.handed_over, dir,
                                         events->get(), static_cast<int64_t>(handed.choice.version))
          : events.status();
  if (!videos.ok()) {
    LOG(WARNING) << "no evaluation videos: " << videos.status();
    return;
  }
  for (const agent::EpisodeVideo& video : *videos) {
    std::printf("video of the %s evaluation episode (seed %llu, driving score %.2f): %s\n",
                video.label.c_str(), static_cast<unsigned long long>(video.seed),
                video.driving_score, video.path.c_str());
  }
  std::printf("the videos in TensorBoard: %s (Images, evaluation/best and evaluation/worst)\n",
              ShellLine({"tensorboard", "--logdir", t.run}).c_str());
}

// Hands over the best validated policy (the last weights when they validate best, or when
// validation is off) and prints its evaluation, on the evaluation seeds no choice was made on.
// Returns false when an evaluation failed.
bool HandOverAndReport(Launch& t, RunEnd end) {
  agent::BestPolicy* const best = t.training->best();
  HandOverOptions options;
  options.average_competes = true;
  options.settle_episodes = absl::GetFlag(FLAGS_final_validation_episodes);
  options.log_prefix = "convoy_train: ";
  agent::EvalSummary random, expert;
  absl::StatusOr<HandOverResult> handed =
      HandOver(best, end, options, EvaluateAgainstRandom(t, &random, &expert));
  if (!handed.ok()) {
    LOG(ERROR) << "evaluation failed: " << handed.status();
    return false;
  }
  const HandOverChoice& choice = handed->choice;
  if (!choice.chose_earlier() && (best == nullptr || !best->has_best())) {
    // No validation kept a file: the last weights it is.
    if (absl::Status s =
            WriteWeightsFile(t.run + "/best/weights.pt", handed->weights.data(), t.info.layout);
        !s.ok()) {
      LOG(WARNING) << s;
    }
  }
  std::fprintf(stderr,
               "convoy_train: evaluating the greedy policy of %s (%s) on %d episodes; its "
               "weights: %s/best/weights.pt\n",
               agent::BestPolicy::NameOf(choice.version, choice.averaged()).c_str(),
               choice.averaged()        ? "the averaged network"
               : choice.chose_earlier() ? "the best validated, not the last"
                                        : "the last",
               absl::GetFlag(FLAGS_eval_episodes), t.run.c_str());
  const std::string table = ResultTable(*handed, end, random, expert);
  std::printf("%s", table.c_str());
  std::ofstream(t.run + "/evaluation.txt") << table;
  if (absl::StatusOr<std::unique_ptr<agent::Environment>> env = agent::MakeEnvironment(t.spec);
      env.ok()) {
    const std::string png = t.run + "/evaluation_map.png";
    if (agent::WriteEpisodeMap(png, (*env)->env->map(), handed->handed_over).ok()) {
      std::printf("map of the greedy episodes: %s\n", png.c_str());
    }
  }
  WriteVideos(t, *handed);
  return true;
}

int Run() {
  if (!NumericFlagsInRange()) return kExitUsage;
  Launch t;
  if (std::optional<int> code = PrepareRun(t); code.has_value()) return *code;
  Printer printer(absl::Seconds(absl::GetFlag(FLAGS_minutes) * 60));
  if (std::optional<int> code = StartRun(t, &printer); code.has_value()) return *code;
  t.training->Train(g_stop);
  absl::StatusOr<RunEnd> end = t.training->Finish();
  std::fprintf(stderr, "convoy_train: convoy_ps stopped (%s); checkpoints in %s/checkpoints\n",
               t.training->ps_exit_code() == 0 ? "final checkpoint written" : "see convoy_ps.log",
               t.run.c_str());
  // Where the agents' CPU-seconds went over the whole run, as its last progress reports had it.
  const ClusterTotals& totals = printer.last();
  // Beside them on the same cores: this process, which validated the server's weights.
  const double validation_cpu = ProcessCpuSeconds();
  const std::string split = absl::StrCat(
      FormatTimeSplitTable(totals.time, totals.wall_seconds, totals.env_steps, totals.train_steps),
      absl::StrFormat("beside them, convoy_train's %d validations: %.1f CPU-s\n"
                      "RESULT validation_cpu_seconds=%.2f\n",
                      static_cast<int>(t.training->curve().size()), validation_cpu,
                      validation_cpu));
  std::printf("where the agents' CPU-seconds went (%.0f env steps, %.0f train steps):\n%s",
              totals.env_steps, totals.train_steps, split.c_str());
  if (!end.ok()) {
    LOG(ERROR) << "cannot fetch the trained weights: " << end.status();
    return 1;
  }
  if (t.training->interrupted()) return 130;
  if (!HandOverAndReport(t, *std::move(end))) return 1;
  std::ofstream(t.run + "/evaluation.txt", std::ios::app) << split;
  if (agent::BestPolicy* best = t.training->best(); best != nullptr) {
    std::printf("%s\n", LeaveLearningCurve(t.run, t.name, t.training->curve(), *best).c_str());
  } else {
    std::printf("learning curve: none, validation is off (--validate_every_seconds=0)\n");
  }
  return t.training->failed_agents() == 0 ? 0 : 1;
}

}  // namespace
}  // namespace convoy::deploy

int main(int argc, char** argv) {
  // Line by line: what it prints on stdout and stderr then reaches a shared pipe or file whole and
  // in the order it was printed.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  convoy::InitProcess(
      argc, argv,
      "convoy_train: trains on this machine: convoy_ps + N agents, then evaluates.\n"
      "Usage: convoy_train [--minutes=10] [--agents=2] [--name=NAME]");
  struct sigaction action = {};
  action.sa_handler = [](int) { convoy::deploy::g_stop = true; };
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGHUP, &action, nullptr);  // A closed terminal stops the run cleanly too.
  return convoy::deploy::Run();
}
