#include "agent/evaluation/episode_video.h"

#include <gif_lib.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "agent/evaluation/eval_statistics.h"
#include "common/support/files.h"
#include "common/support/status_macros.h"
#include "simulator_bridge/world/car_sim.h"

namespace convoy::agent {
namespace {

// The fixed palette: 6 reds x 7 greens x 6 blues (252 colours), the rest black.
constexpr int kReds = 6, kGreens = 7, kBlues = 6;

uint8_t PaletteIndex(uint8_t r, uint8_t g, uint8_t b) {
  const int ri = (r * (kReds - 1) + 127) / 255;
  const int gi = (g * (kGreens - 1) + 127) / 255;
  const int bi = (b * (kBlues - 1) + 127) / 255;
  return static_cast<uint8_t>((ri * kGreens + gi) * kBlues + bi);
}

int AppendToString(GifFileType* gif, const GifByteType* data, int length) {
  static_cast<std::string*>(gif->UserData)->append(reinterpret_cast<const char*>(data), length);
  return length;
}

absl::Status GifError(const char* what, int code) {
  const char* message = GifErrorString(code);
  return absl::InternalError(absl::StrCat("giflib: ", what, ": ", message ? message : "error"));
}

}  // namespace

GifAnimation::GifAnimation(int width, int height, int frame_centiseconds)
    : width_(width), height_(height), frame_centiseconds_(frame_centiseconds) {}

void GifAnimation::AddFrame(const uint8_t* rgb) {
  const size_t pixels = static_cast<size_t>(width_) * height_;
  const size_t at = indices_.size();
  indices_.resize(at + pixels);
  for (size_t p = 0; p < pixels; ++p) {
    indices_[at + p] = PaletteIndex(rgb[3 * p], rgb[3 * p + 1], rgb[3 * p + 2]);
  }
  ++frames_;
}

absl::StatusOr<std::string> GifAnimation::Encode() const {
  std::string out;
  int error = 0;
  GifFileType* gif = EGifOpen(&out, &AppendToString, &error);
  if (gif == nullptr) return GifError("EGifOpen", error);
  // Closes the file on every path; EGifCloseFile frees it even when it fails.
  auto close = [&gif, &error]() -> absl::Status {
    GifFileType* g = gif;
    gif = nullptr;
    if (g != nullptr && EGifCloseFile(g, &error) != GIF_OK) return GifError("close", error);
    return absl::OkStatus();
  };
  // giflib's error for `what`, the file closed.
  auto fail = [&gif, &close](const char* what) {
    const int code = gif->Error;
    (void)close();
    return GifError(what, code);
  };
  std::vector<GifColorType> colours(256, GifColorType{0, 0, 0});
  for (int r = 0; r < kReds; ++r) {
    for (int g = 0; g < kGreens; ++g) {
      for (int b = 0; b < kBlues; ++b) {
        colours[(r * kGreens + g) * kBlues + b] = {
            static_cast<GifByteType>(r * 255 / (kReds - 1)),
            static_cast<GifByteType>(g * 255 / (kGreens - 1)),
            static_cast<GifByteType>(b * 255 / (kBlues - 1))};
      }
    }
  }
  std::unique_ptr<ColorMapObject, void (*)(ColorMapObject*)> palette(
      GifMakeMapObject(256, colours.data()), &GifFreeMapObject);
  EGifSetGifVersion(gif, true);
  if (palette == nullptr ||
      EGifPutScreenDesc(gif, width_, height_, 8, 0, palette.get()) != GIF_OK) {
    return fail("screen descriptor");
  }
  // Loop forever (the NETSCAPE2.0 application extension).
  static constexpr GifByteType kNetscape[] = "NETSCAPE2.0";
  static constexpr GifByteType kLoop[] = {1, 0, 0};
  if (EGifPutExtensionLeader(gif, APPLICATION_EXT_FUNC_CODE) != GIF_OK ||
      EGifPutExtensionBlock(gif, 11, kNetscape) != GIF_OK ||
      EGifPutExtensionBlock(gif, 3, kLoop) != GIF_OK || EGifPutExtensionTrailer(gif) != GIF_OK) {
    return fail("loop extension");
  }
  const size_t pixels = static_cast<size_t>(width_) * height_;
  std::vector<GifPixelType> row(static_cast<size_t>(width_));
  for (int f = 0; f < frames_; ++f) {
    GraphicsControlBlock control{};
    control.DisposalMode = DISPOSAL_UNSPECIFIED;
    control.DelayTime = frame_centiseconds_;
    control.TransparentColor = NO_TRANSPARENT_COLOR;
    GifByteType extension[4];
    const size_t length = EGifGCBToExtension(&control, extension);
    if (EGifPutExtension(gif, GRAPHICS_EXT_FUNC_CODE, static_cast<int>(length), extension) !=
            GIF_OK ||
        EGifPutImageDesc(gif, 0, 0, width_, height_, false, nullptr) != GIF_OK) {
      return fail("frame header");
    }
    for (int y = 0; y < height_; ++y) {
      std::memcpy(row.data(), &indices_[f * pixels + static_cast<size_t>(y) * width_], row.size());
      if (EGifPutLine(gif, row.data(), width_) != GIF_OK) {
        return fail("frame");
      }
    }
  }
  CONVOY_RETURN_IF_ERROR(close());
  return out;
}

namespace {
constexpr double kMapPixelsPerMetre = 0.5;
constexpr int kGapPixels = 4;
}  // namespace

EpisodeFilm::EpisodeFilm(const sim::RoadMap& map, int camera_width, int camera_height,
                         int frame_centiseconds)
    : map_(DrawMap(map, kMapPixelsPerMetre)),
      camera_width_(camera_width),
      camera_height_(camera_height),
      animation_(camera_width + kGapPixels + map_.width, std::max(camera_height, map_.height),
                 frame_centiseconds) {
  frame_.assign(static_cast<size_t>(animation_.width()) * animation_.height() * 3, 0);
}

void EpisodeFilm::AddFrame(const uint8_t* camera_bgr, double x, double y, bool collided) {
  static constexpr uint8_t kPath[3] = {60, 200, 255};
  static constexpr uint8_t kCar[3] = {255, 255, 255};
  static constexpr uint8_t kCrash[3] = {255, 40, 40};
  if (has_last_) map_.Line(last_x_, last_y_, x, y, 2.0, kPath);
  has_last_ = true;
  last_x_ = x;
  last_y_ = y;
  const int width = animation_.width();
  std::fill(frame_.begin(), frame_.end(), 0);
  for (int row = 0; row < camera_height_; ++row) {
    const uint8_t* src = camera_bgr + static_cast<size_t>(row) * camera_width_ * 3;
    uint8_t* dst = &frame_[static_cast<size_t>(row) * width * 3];
    for (int col = 0; col < camera_width_; ++col) {
      dst[3 * col] = src[3 * col + 2];
      dst[3 * col + 1] = src[3 * col + 1];
      dst[3 * col + 2] = src[3 * col];
    }
  }
  const int left = camera_width_ + kGapPixels;
  for (int row = 0; row < map_.height; ++row) {
    std::memcpy(&frame_[(static_cast<size_t>(row) * width + left) * 3],
                &map_.rgb[static_cast<size_t>(row) * map_.width * 3],
                static_cast<size_t>(map_.width) * 3);
  }
  double px, py;
  map_.ToPixel(x, y, &px, &py);
  for (int dy = -2; dy <= 2; ++dy) {
    for (int dx = -2; dx <= 2; ++dx) {
      const int fx = left + static_cast<int>(px) + dx, fy = static_cast<int>(py) + dy;
      if (fx < left || fx >= width || fy < 0 || fy >= map_.height) continue;
      std::copy(collided ? kCrash : kCar, (collided ? kCrash : kCar) + 3,
                &frame_[(static_cast<size_t>(fy) * width + fx) * 3]);
    }
  }
  animation_.AddFrame(frame_.data());
}

namespace {

// The GIF of `seed`'s episode driven again by the greedy policy of `weights`: about 150 frames at
// most, at the speed of the simulation.
absl::StatusOr<std::string> FilmEpisode(GreedyEvaluator& evaluator,
                                        const std::vector<float>& weights, uint64_t seed,
                                        int expected_steps, int* width, int* height) {
  sim::DrivingEnv& env = evaluator.env();
  sim::ImageRequest request;
  request.camera_name = env.options().camera_name;
  request.image_type = sim::ImageType::kScene;
  const std::vector<sim::ImageRequest> requests = {request};
  std::vector<sim::ImageResponse> responses;
  const int stride = std::max(1, (expected_steps + 149) / 150);
  const int centiseconds =
      std::max(2, static_cast<int>(std::lround(stride * env.options().control_period_sec * 100)));
  std::unique_ptr<EpisodeFilm> film;
  CONVOY_ASSIGN_OR_RETURN(
      EvalSummary again,
      evaluator.Greedy(weights, {seed}, [&](const EvalStep& step) -> absl::Status {
        if (step.step % stride != 0 && !step.result->done) return absl::OkStatus();
        CONVOY_RETURN_IF_ERROR(env.sim().GetImages(requests, &responses));
        sim::ImageResponse& image = responses[0];
        const size_t pixels = static_cast<size_t>(image.width) * image.height;
        if (image.image_data_uint8.size() == pixels * 4) {  // AirSim before 1.3: BGRA
          for (size_t p = 0; p < pixels; ++p) {
            std::memmove(&image.image_data_uint8[3 * p], &image.image_data_uint8[4 * p], 3);
          }
          image.image_data_uint8.resize(pixels * 3);
        }
        if (pixels == 0 || image.image_data_uint8.size() != pixels * 3) {
          return absl::FailedPreconditionError(
              absl::StrCat("the camera sent ", image.width, "x", image.height, " pixels in ",
                           image.image_data_uint8.size(), " bytes, not 3 or 4 per pixel"));
        }
        if (film == nullptr) {
          film = std::make_unique<EpisodeFilm>(env.map(), image.width, image.height, centiseconds);
        }
        film->AddFrame(image.image_data_uint8.data(), step.result->car.x, step.result->car.y,
                       step.result->car.collided);
        return absl::OkStatus();
      }));
  if (film == nullptr) return absl::InternalError("the episode had no step to film");
  *width = film->animation().width();
  *height = film->animation().height();
  return film->animation().Encode();
}

}  // namespace

absl::StatusOr<std::vector<EpisodeVideo>> WriteEvaluationVideos(
    GreedyEvaluator& evaluator, const std::vector<float>& weights, const EvalSummary& summary,
    const std::string& dir, EventFileWriter* events, int64_t step) {
  if (summary.episodes.empty()) return absl::InvalidArgumentError("no episodes to film");
  const EpisodeRecord* best = &summary.episodes.front();
  const EpisodeRecord* worst = best;
  for (const EpisodeRecord& e : summary.episodes) {
    const double score = DrivingScore(e);
    const double best_score = DrivingScore(*best), worst_score = DrivingScore(*worst);
    if (score > best_score || (score == best_score && e.distance_m > best->distance_m)) best = &e;
    if (score < worst_score || (score == worst_score && e.distance_m < worst->distance_m)) {
      worst = &e;
    }
  }
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) return absl::InternalError(absl::StrCat("cannot create ", dir, ": ", error.message()));
  std::vector<EpisodeVideo> videos;
  for (const auto& [label, episode] :
       {std::pair<const char*, const EpisodeRecord*>{"best", best}, {"worst", worst}}) {
    int width = 0, height = 0;
    CONVOY_ASSIGN_OR_RETURN(std::string gif, FilmEpisode(evaluator, weights, episode->seed,
                                                         episode->steps, &width, &height));
    EpisodeVideo video{label, episode->seed, DrivingScore(*episode),
                       absl::StrCat(dir, "/", label, "-", episode->seed, ".gif")};
    CONVOY_RETURN_IF_ERROR(WriteFileAtomically(video.path, gif, 0644));
    if (events != nullptr) {
      CONVOY_RETURN_IF_ERROR(
          events->AddImage(absl::StrCat("evaluation/", label), step, gif, width, height));
    }
    videos.push_back(std::move(video));
  }
  if (events != nullptr) CONVOY_RETURN_IF_ERROR(events->Flush());
  return videos;
}

}  // namespace convoy::agent
