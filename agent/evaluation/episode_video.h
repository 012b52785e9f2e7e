// Videos of evaluation episodes: the car's camera beside the map with the path driven so far, as
// animated GIFs encoded by giflib. A browser plays them, and so does TensorBoard's image dashboard
// (EventFileWriter::AddImage), which shows a GIF as it is.
//
// Colours go through a fixed 6x7x6 palette (the renderer's flat surfaces keep their look); frames
// are every `stride`-th control step, shown at the speed the simulation ran.
#ifndef CONVOY_AGENT_EVALUATION_EPISODE_VIDEO_H_
#define CONVOY_AGENT_EVALUATION_EPISODE_VIDEO_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/evaluation/evaluation.h"
#include "agent/evaluation/map_image.h"
#include "common/metrics/tfevents.h"

namespace convoy::agent {

// An animated GIF built frame by frame from RGB pictures of one size.
class GifAnimation {
 public:
  GifAnimation(int width, int height, int frame_centiseconds);
  // `rgb` holds width * height * 3 bytes.
  void AddFrame(const uint8_t* rgb);
  int frames() const { return frames_; }
  int width() const { return width_; }
  int height() const { return height_; }
  // The GIF file's bytes, looping forever. Errors: INTERNAL with giflib's message.
  absl::StatusOr<std::string> Encode() const;

 private:
  int width_;
  int height_;
  int frame_centiseconds_;
  int frames_ = 0;
  std::vector<uint8_t> indices_;  // palette indices, frame after frame
};

// One episode on film: each frame the camera picture (BGR, as AirSim sends it) on the left and
// the map with the path so far and the car on the right.
class EpisodeFilm {
 public:
  EpisodeFilm(const sim::RoadMap& map, int camera_width, int camera_height, int frame_centiseconds);
  // Adds a frame of the car at (x, y) seeing `camera_bgr`.
  void AddFrame(const uint8_t* camera_bgr, double x, double y, bool collided);
  const GifAnimation& animation() const { return animation_; }

 private:
  MapPicture map_;  // with the path drawn so far
  int camera_width_;
  int camera_height_;
  bool has_last_ = false;
  double last_x_ = 0.0;
  double last_y_ = 0.0;
  std::vector<uint8_t> frame_;
  GifAnimation animation_;
};

// Where WriteEvaluationVideos put a video.
struct EpisodeVideo {
  std::string label;  // "best" or "worst"
  uint64_t seed = 0;
  double driving_score = 0.0;
  std::string path;
};

// Films the best and the worst episode of `summary` (by driving score; the longer distance breaks a
// tie for best, the shorter for worst) by driving each one's seed again with the greedy policy of
// `weights` (an episode is a function of its seed), and writes them to `dir`/best-<seed>.gif and
// `dir`/worst-<seed>.gif. With `events`, each also goes to TensorBoard as the image
// evaluation/best or evaluation/worst at `step`. Errors: the evaluator's, giflib's, or the I/O
// error.
absl::StatusOr<std::vector<EpisodeVideo>> WriteEvaluationVideos(
    GreedyEvaluator& evaluator, const std::vector<float>& weights, const EvalSummary& summary,
    const std::string& dir, EventFileWriter* events = nullptr, int64_t step = 0);

}  // namespace convoy::agent

#endif  // CONVOY_AGENT_EVALUATION_EPISODE_VIDEO_H_
