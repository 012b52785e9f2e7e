// EvalTrace: what an evaluated policy saw and chose, step by step, for finding out why episodes end
// early. Observe() takes each step of GreedyEvaluator::Greedy (with the Q-values its action was
// chosen by) and writes one CSV row: the episode's seed and step, the car's pose, speed and
// distance from the centre line, where on the map it is (RoadMap::PlaceOf), the action, every
// action's Q-value, the reward and, on the last step, why the episode ended. With a frames
// directory it also keeps the last observations of each episode and, for every episode that ends
// before the time limit, writes them as one PNG: the camera crop the car saw 20, 15, 10, 5 and 1
// steps before the end, top to bottom. Not thread-safe.
#ifndef CONVOY_AGENT_EVALUATION_EVAL_TRACE_H_
#define CONVOY_AGENT_EVALUATION_EVAL_TRACE_H_

#include <array>
#include <cstdio>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "agent/evaluation/evaluation.h"
#include "simulator_bridge/world/road_map.h"

namespace convoy::agent {

class EvalTrace {
 public:
  // `csv_path` is created (replaced); `frames_dir` (empty: no frames) is created if missing.
  // `observation_shape` is the environment's (channels, height, width); frames are written only for
  // the cookbook crop's 3-channel images. Errors: INTERNAL naming a path that cannot be written.
  static absl::StatusOr<std::unique_ptr<EvalTrace>> Create(const std::string& csv_path,
                                                           const std::string& frames_dir,
                                                           const sim::RoadMap& map,
                                                           std::array<int, 3> observation_shape,
                                                           int num_actions);
  ~EvalTrace();

  // One step and the Q-values its action was chosen by (num_actions of them).
  absl::Status Observe(const EvalStep& step, const std::vector<float>& q_values);
  // Flushes and closes the CSV; errors name the file.
  absl::Status Close();

  // The steps of early-ended episodes the frames are taken at, counted back from the last.
  static constexpr std::array<int, 5> kFramesBeforeEnd = {20, 15, 10, 5, 1};

 private:
  EvalTrace(std::FILE* csv, std::string csv_path, std::string frames_dir, const sim::RoadMap& map,
            std::array<int, 3> shape, int num_actions);
  absl::Status WriteFrames(const EvalStep& step);

  std::FILE* csv_;
  std::string csv_path_;
  std::string frames_dir_;
  const sim::RoadMap& map_;
  std::array<int, 3> shape_;
  int num_actions_;
  std::deque<std::vector<uint8_t>> recent_;  // The episode's last frames, newest at the back.
};

}  // namespace convoy::agent

#endif  // CONVOY_AGENT_EVALUATION_EVAL_TRACE_H_
