// convoy_eval: loads weights (a checkpoint directory or a weights.pt), drives N fixed-seed episodes greedily
// and at random, prints the comparison table and RESULT lines, and draws the episodes on a map.
#include <glog/logging.h>

#include <cstdio>

#include "absl/flags/flag.h"
#include "agent/evaluation.h"
#include "agent/map_image.h"
#include "common/flag_ranges.h"
#include "common/init.h"
#include "common/run_defaults.h"
#include "common/weights_file.h"

ABSL_FLAG(std::string, checkpoint, "", "A checkpoint directory (its weights.pt) or a weights.pt file.");
ABSL_FLAG(std::string, model, convoy::run_defaults::kLocalModel, "The model the weights belong to.");
ABSL_FLAG(int, episodes, 20, "Evaluation episodes (fixed seeds).");
ABSL_FLAG(std::string, sim, convoy::EnvironmentSpec{}.sim, "embedded, or airsim://host:port.");
ABSL_FLAG(double, max_epoch_runtime_sec, convoy::EnvironmentSpec{}.env.max_epoch_runtime_sec,
          "Episode time limit, simulation seconds.");
ABSL_FLAG(int, parked_cars, convoy::EnvironmentSpec{}.parked_cars,
          "Parked cars in the embedded simulator.");
ABSL_FLAG(std::string, map_png, "", "Write a top-down map of every episode's path here (PNG).");

namespace convoy {
namespace {

int Run() {
  if (!FlagsInRange("convoy_eval",
                    {IntRange("episodes", absl::GetFlag(FLAGS_episodes), 1, 100000),
                     RealRange("max_epoch_runtime_sec", absl::GetFlag(FLAGS_max_epoch_runtime_sec),
                               0, kNoRealMax, Ends::kOpenMin),
                     IntRange("parked_cars", absl::GetFlag(FLAGS_parked_cars), 0, 10000)})) {
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
  EnvironmentSpec spec;
  spec.sim = absl::GetFlag(FLAGS_sim);
  spec.parked_cars = absl::GetFlag(FLAGS_parked_cars);
  spec.env.max_epoch_runtime_sec = absl::GetFlag(FLAGS_max_epoch_runtime_sec);
  absl::StatusOr<Comparison> result =
      CompareWithRandom(model->spec.name, *weights, spec, absl::GetFlag(FLAGS_episodes));
  if (!result.ok()) {
    LOG(ERROR) << result.status();
    return 1;
  }
  std::printf("%s", FormatComparison(result->greedy, result->random).c_str());
  if (const std::string png = absl::GetFlag(FLAGS_map_png); !png.empty()) {
    absl::StatusOr<std::unique_ptr<Environment>> env = MakeEnvironment(spec);
    absl::Status written = env.ok() ? WriteEpisodeMap(png, (*env)->env->map(), result->greedy)
                                    : env.status();
    if (!written.ok()) {
      LOG(ERROR) << written;
      return 1;
    }
    std::printf("map of the greedy episodes: %s\n", png.c_str());
  }
  return 0;
}

}  // namespace
}  // namespace convoy

int main(int argc, char** argv) {
  convoy::InitProcess(argc, argv,
                      "convoy_eval: evaluates trained weights against a random policy.\n"
                      "Usage: convoy_eval --checkpoint=DIR|weights.pt [--model=compact] "
                      "[--episodes=20] [--map_png=map.png]");
  return convoy::Run();
}
