// convoy_eval: loads weights (a checkpoint directory or a weights.pt), drives N fixed-seed episodes
// of a scenario greedily, at random and with the scripted expert, prints the comparison table and
// RESULT lines, and draws the episodes on a map.
#include <glog/logging.h>

#include <cstdio>
#include <limits>

#include "absl/flags/flag.h"
#include "agent/environment/scenario_settings.h"
#include "agent/evaluation/episode_video.h"
#include "agent/evaluation/eval_trace.h"
#include "agent/evaluation/evaluation.h"
#include "agent/evaluation/map_image.h"
#include "common/model/weights_file.h"
#include "common/settings/flag_ranges.h"
#include "common/settings/process_settings.h"
#include "common/settings/run_defaults.h"
#include "common/support/init.h"
#include "common/support/settings_table.h"

namespace {
// The defaults the flags below show. One object rather than a temporary per flag: GCC 12 takes the
// temporaries' SimTarget::host for uninitialised (-Wmaybe-uninitialized).
const convoy::agent::EnvironmentSpec& DefaultSpec() {
  static const convoy::agent::EnvironmentSpec* const spec = new convoy::agent::EnvironmentSpec();
  return *spec;
}
}  // namespace

// convoy_eval's own flags, a row each (common/support/settings_table.h); the settings other
// binaries take too are written through common/settings/process_settings.h.
#define CONVOY_EVAL_SETTINGS(X)                                                                    \
  X(std::string, checkpoint, "", "A checkpoint directory (its weights.pt) or a weights.pt file.")  \
  CONVOY_PROCESS_SETTING(X, model, convoy::run_defaults::kLocalModel,                              \
                         "The model the weights belong to.")                                       \
  X(int, episodes, 100,                                                                            \
    "Evaluation episodes, on fixed seeds held out from training and validation. The table "        \
    "gives every rate and mean with its 95% confidence interval; 20 episodes (a run's "            \
    "hand-over) are a quick check, too few to tell 17 of 20 from 19.")                             \
  X(convoy::agent::SimTarget, sim, DefaultSpec().sim, "embedded, or airsim://host:port.")          \
  X(std::string, map_png, "", "Write a top-down map of every episode's path here (PNG).")          \
  X(std::string, videos, "",                                                                       \
    "A directory for videos (animated GIFs) of the best and the worst greedy episode: the "        \
    "camera beside the map with the path; also a TensorBoard event file there.")                   \
  X(std::string, trace, "",                                                                        \
    "Write every greedy step here (CSV): pose, speed, distance from the centre line, place on "    \
    "the "                                                                                         \
    "map, action, the Q-values of every action, reward, and why the episode ended.")               \
  X(double, expert_sight_m, 0,                                                                     \
    "How near a stalled car must be for the scripted expert to know it, in metres (0: it "         \
    "knows every one). To measure how far ahead a driver must see to drive round them.")           \
  X(std::string, trace_frames, "",                                                                 \
    "With --trace: a directory for one PNG per episode that ended early, the camera crop the car " \
    "saw 20, 15, 10, 5 and 1 steps before the end.")
CONVOY_EVAL_SETTINGS(CONVOY_SETTING_FLAG)

// The settings this binary shares with others, as flags (common/support/settings_table.h).
CONVOY_SETTINGS_FLAGS(CONVOY_SCENARIO_SETTINGS, convoy::agent::ScenarioSettings,
                      ScenarioSettingsFromFlags)

namespace convoy::agent {
namespace {

// The greedy episodes' map (--map_png) and the best and worst episodes' videos (--videos). False
// (logged) when one could not be written.
bool WriteMapAndVideos(GreedyEvaluator& evaluator, const std::vector<float>& weights,
                       const EvalSummary& greedy) {
  if (const std::string png = absl::GetFlag(FLAGS_map_png); !png.empty()) {
    absl::Status written = WriteEpisodeMap(png, evaluator.env().map(), greedy);
    if (!written.ok()) {
      LOG(ERROR) << written;
      return false;
    }
    std::printf("map of the greedy episodes: %s\n", png.c_str());
  }
  if (const std::string dir = absl::GetFlag(FLAGS_videos); !dir.empty()) {
    absl::StatusOr<std::unique_ptr<EventFileWriter>> events = EventFileWriter::Create(dir);
    absl::StatusOr<std::vector<EpisodeVideo>> videos =
        events.ok() ? WriteEvaluationVideos(evaluator, weights, greedy, dir, events->get())
                    : events.status();
    if (!videos.ok()) {
      LOG(ERROR) << videos.status();
      return false;
    }
    for (const EpisodeVideo& video : *videos) {
      std::printf("video of the %s episode (seed %llu, driving score %.2f): %s\n",
                  video.label.c_str(), static_cast<unsigned long long>(video.seed),
                  video.driving_score, video.path.c_str());
    }
  }
  return true;
}

int Run() {
  if (!FlagsInRange("convoy_eval", {IntRange("episodes", absl::GetFlag(FLAGS_episodes), 1, 100000),
                                    RealRange("expert_sight_m", absl::GetFlag(FLAGS_expert_sight_m),
                                              0, kNoRealMax)})) {
    return kExitUsage;
  }
  EnvironmentSpec spec;
  if (absl::Status s = UseScenarioSettings(ScenarioSettingsFromFlags(), &spec); !s.ok()) {
    std::fprintf(stderr, "convoy_eval: %s\n", std::string(s.message()).c_str());
    return kExitUsage;
  }
  const std::string checkpoint = absl::GetFlag(FLAGS_checkpoint);
  if (checkpoint.empty()) {
    LOG(ERROR) << "--checkpoint is required";
    return 2;
  }
  absl::StatusOr<ModelInfo> model = DescribeModel(absl::GetFlag(FLAGS_model));
  if (!model.ok()) {
    LOG(ERROR) << model.status();
    return 2;
  }
  absl::StatusOr<std::vector<float>> weights = ReadWeightsFile(checkpoint, model->layout);
  if (!weights.ok()) {
    LOG(ERROR) << weights.status();
    return 1;
  }
  spec.sim = absl::GetFlag(FLAGS_sim);
  absl::StatusOr<std::unique_ptr<GreedyEvaluator>> evaluator =
      GreedyEvaluator::Create(model->spec.name, spec);
  if (!evaluator.ok()) {
    LOG(ERROR) << evaluator.status();
    return 1;
  }
  sim::DrivingEnv& env = (*evaluator)->env();
  std::unique_ptr<EvalTrace> trace;
  StepObserver observer;
  if (const std::string path = absl::GetFlag(FLAGS_trace); !path.empty()) {
    absl::StatusOr<std::unique_ptr<EvalTrace>> created =
        EvalTrace::Create(path, absl::GetFlag(FLAGS_trace_frames), env.map(),
                          env.observation_shape(), env.num_actions());
    if (!created.ok()) {
      LOG(ERROR) << created.status();
      return 1;
    }
    trace = *std::move(created);
    observer = [&](const EvalStep& step) { return trace->Observe(step, (*evaluator)->q_values()); };
  } else if (!absl::GetFlag(FLAGS_trace_frames).empty()) {
    LOG(ERROR) << "--trace_frames needs --trace";
    return kExitUsage;
  }
  const int episodes = absl::GetFlag(FLAGS_episodes);
  absl::StatusOr<EvalSummary> greedy =
      (*evaluator)->Greedy(*weights, EvaluationSeeds(episodes), observer);
  absl::Status closed = trace ? trace->Close() : absl::OkStatus();
  if (greedy.ok() && !closed.ok()) greedy = closed;
  absl::StatusOr<EvalSummary> random =
      greedy.ok() ? (*evaluator)->Random(episodes) : greedy.status();
  const double sight_m = absl::GetFlag(FLAGS_expert_sight_m);
  absl::StatusOr<EvalSummary> expert =
      random.ok()
          ? (*evaluator)
                ->Expert(episodes, sight_m > 0 ? sight_m : std::numeric_limits<double>::infinity())
          : random.status();
  if (!expert.ok()) {
    LOG(ERROR) << expert.status();
    return 1;
  }
  if (sight_m > 0) {
    std::printf("scripted expert: knows a stalled car only within %.1f m\n", sight_m);
  }
  std::printf("%s", FormatComparison(*greedy, *random, &*expert).c_str());
  return WriteMapAndVideos(**evaluator, *weights, *greedy) ? 0 : 1;
  return 0;
}

}  // namespace
}  // namespace convoy::agent

int main(int argc, char** argv) {
  convoy::InitProcess(argc, argv,
                      "convoy_eval: evaluates trained weights against a random policy.\n"
                      "Usage: convoy_eval --checkpoint=DIR|weights.pt [--model=compact] "
                      "[--episodes=100] [--map_png=map.png]");
  return convoy::agent::Run();
}
