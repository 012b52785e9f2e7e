#include "agent/evaluation/episode_video.h"

#include <gif_lib.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "agent/environment/environment.h"
#include "agent/evaluation/eval_statistics.h"
#include "common/model/model_registry.h"
#include "common/support/files.h"
#include "tests/catch.h"
#include "tests/support/subprocess.h"

namespace convoy::agent {
namespace {

struct DecodedGif {
  int width = 0;
  int height = 0;
  int frames = 0;
  bool loops = false;
  std::vector<int> delays;  // centiseconds, per frame
  std::vector<uint8_t> first_frame_rgb;
};

int ReadFromString(GifFileType* gif, GifByteType* out, int length) {
  auto* source = static_cast<std::pair<const std::string*, size_t>*>(gif->UserData);
  const int n = static_cast<int>(
      std::min<size_t>(static_cast<size_t>(length), source->first->size() - source->second));
  std::memcpy(out, source->first->data() + source->second, static_cast<size_t>(n));
  source->second += static_cast<size_t>(n);
  return n;
}

// Decodes with giflib's own reader: what any viewer would see.
DecodedGif Decode(const std::string& bytes) {
  std::pair<const std::string*, size_t> source{&bytes, 0};
  int error = 0;
  GifFileType* gif = DGifOpen(&source, &ReadFromString, &error);
  REQUIRE(gif != nullptr);
  REQUIRE(DGifSlurp(gif) == GIF_OK);
  DecodedGif decoded;
  decoded.width = gif->SWidth;
  decoded.height = gif->SHeight;
  decoded.frames = gif->ImageCount;
  for (int i = 0; i < gif->ImageCount; ++i) {
    GraphicsControlBlock control;
    if (DGifSavedExtensionToGCB(gif, i, &control) == GIF_OK) {
      decoded.delays.push_back(control.DelayTime);
    }
    for (int e = 0; e < gif->SavedImages[i].ExtensionBlockCount; ++e) {
      const ExtensionBlock& block = gif->SavedImages[i].ExtensionBlocks[e];
      if (block.Function == APPLICATION_EXT_FUNC_CODE && block.ByteCount == 11 &&
          std::memcmp(block.Bytes, "NETSCAPE2.0", 11) == 0) {
        decoded.loops = true;
      }
    }
  }
  const SavedImage& first = gif->SavedImages[0];
  const ColorMapObject* palette =
      first.ImageDesc.ColorMap ? first.ImageDesc.ColorMap : gif->SColorMap;
  for (int p = 0; p < decoded.width * decoded.height; ++p) {
    const GifColorType& c = palette->Colors[first.RasterBits[p]];
    decoded.first_frame_rgb.insert(decoded.first_frame_rgb.end(), {c.Red, c.Green, c.Blue});
  }
  DGifCloseFile(gif, &error);
  return decoded;
}

TEST_CASE("A GIF animation decodes to its frames, their delay and near colours, and loops",
          "[episode_video]") {
  GifAnimation animation(8, 4, 20);
  std::vector<uint8_t> red(8 * 4 * 3), grey(8 * 4 * 3, 128);
  for (size_t p = 0; p < red.size(); p += 3) red[p] = 250;
  animation.AddFrame(red.data());
  animation.AddFrame(grey.data());
  animation.AddFrame(red.data());
  absl::StatusOr<std::string> gif = animation.Encode();
  REQUIRE(gif.ok());
  CHECK(gif->substr(0, 6) == "GIF89a");
  const DecodedGif decoded = Decode(*gif);
  CHECK(decoded.width == 8);
  CHECK(decoded.height == 4);
  CHECK(decoded.frames == 3);
  CHECK(decoded.loops);
  CHECK(decoded.delays == std::vector<int>{20, 20, 20});
  // The fixed palette keeps a colour within half a step (255 / 5 / 2 for red and blue).
  CHECK(decoded.first_frame_rgb[0] == 255);
  CHECK(decoded.first_frame_rgb[1] == 0);
  CHECK(decoded.first_frame_rgb[2] == 0);
}

TEST_CASE("The best and the worst evaluation episode become videos and TensorBoard images",
          "[episode_video]") {
  EnvironmentSpec spec;
  REQUIRE(UseScenario("traffic", &spec).ok());
  spec.env.route_length_m = 40;  // short episodes
  spec.env.max_epoch_runtime_sec = 10;
  absl::StatusOr<std::unique_ptr<GreedyEvaluator>> evaluator =
      GreedyEvaluator::Create("compact", spec);
  REQUIRE(evaluator.ok());
  absl::StatusOr<ModelInfo> model = DescribeModel("compact");
  REQUIRE(model.ok());
  const std::vector<float> weights(model->parameter_count, 0.001f);
  absl::StatusOr<EvalSummary> summary = (*evaluator)->Greedy(weights, 6);
  REQUIRE(summary.ok());
  const std::string dir = testing::MakeTempDir("convoy_videos");
  absl::StatusOr<std::unique_ptr<EventFileWriter>> events = EventFileWriter::Create(dir);
  REQUIRE(events.ok());
  absl::StatusOr<std::vector<EpisodeVideo>> videos =
      WriteEvaluationVideos(**evaluator, weights, *summary, dir, events->get(), 7);
  REQUIRE(videos.ok());
  REQUIRE(videos->size() == 2);
  const EpisodeVideo& best = (*videos)[0];
  const EpisodeVideo& worst = (*videos)[1];
  CHECK(best.label == "best");
  CHECK(worst.label == "worst");
  CHECK(best.driving_score >= worst.driving_score);
  double top = 0.0, bottom = 1.0;
  for (const EpisodeRecord& e : summary->episodes) {
    top = std::max(top, DrivingScore(e));
    bottom = std::min(bottom, DrivingScore(e));
  }
  CHECK(best.driving_score == top);
  CHECK(worst.driving_score == bottom);
  for (const EpisodeVideo& video : *videos) {
    CAPTURE(video.path);
    CHECK(video.path == dir + "/" + video.label + "-" + std::to_string(video.seed) + ".gif");
    absl::StatusOr<std::string> bytes = ReadFileToString(video.path);
    REQUIRE(bytes.ok());
    const DecodedGif decoded = Decode(*bytes);
    // The camera (256 wide) beside the map; one frame a control step for episodes this short,
    // as many as the episode had steps.
    CHECK(decoded.width > 256);
    int steps = 0;
    for (const EpisodeRecord& e : summary->episodes) {
      if (e.seed == video.seed) steps = e.steps;
    }
    CHECK(decoded.frames == steps);
    CHECK(decoded.loops);
  }
  // TensorBoard gets both, as images of the given step.
  events->reset();
  std::string event_file;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().filename().string().rfind("events.out.tfevents.", 0) == 0) {
      event_file = entry.path().string();
    }
  }
  REQUIRE(!event_file.empty());
  absl::StatusOr<std::vector<ImageEvent>> images = ReadImages(event_file);
  REQUIRE(images.ok());
  REQUIRE(images->size() == 2);
  CHECK((*images)[0].tag == "evaluation/best");
  CHECK((*images)[1].tag == "evaluation/worst");
  CHECK((*images)[0].step == 7);
  CHECK(*ReadFileToString(best.path) == (*images)[0].encoded);
}

}  // namespace
}  // namespace convoy::agent
