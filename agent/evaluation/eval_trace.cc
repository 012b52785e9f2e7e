#include "agent/evaluation/eval_trace.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "simulator_bridge/world/png.h"

namespace convoy::agent {

absl::StatusOr<std::unique_ptr<EvalTrace>> EvalTrace::Create(const std::string& csv_path,
                                                             const std::string& frames_dir,
                                                             const sim::RoadMap& map,
                                                             std::array<int, 3> observation_shape,
                                                             int num_actions) {
  if (!frames_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(frames_dir, ec);
    if (ec)
      return absl::InternalError(absl::StrCat("cannot create ", frames_dir, ": ", ec.message()));
  }
  std::FILE* csv = std::fopen(csv_path.c_str(), "w");
  if (csv == nullptr) {
    return absl::InternalError(absl::StrCat("cannot write ", csv_path, ": ", std::strerror(errno)));
  }
  std::string header = "seed,step,x,y,yaw,speed,distance_to_center_m,place,action";
  for (int a = 0; a < num_actions; ++a) absl::StrAppend(&header, ",q_", a);
  absl::StrAppend(&header, ",reward,end\n");
  std::fputs(header.c_str(), csv);
  return std::unique_ptr<EvalTrace>(
      new EvalTrace(csv, csv_path, frames_dir, map, observation_shape, num_actions));
}

EvalTrace::EvalTrace(std::FILE* csv, std::string csv_path, std::string frames_dir,
                     const sim::RoadMap& map, std::array<int, 3> shape, int num_actions)
    : csv_(csv),
      csv_path_(std::move(csv_path)),
      frames_dir_(std::move(frames_dir)),
      map_(map),
      shape_(shape),
      num_actions_(num_actions) {}

EvalTrace::~EvalTrace() {
  if (csv_ != nullptr) std::fclose(csv_);
}

absl::Status EvalTrace::Observe(const EvalStep& step, const std::vector<float>& q_values) {
  if (csv_ == nullptr) return absl::FailedPreconditionError("the trace is closed");
  if (static_cast<int>(q_values.size()) != num_actions_) {
    return absl::InvalidArgumentError(
        absl::StrCat(q_values.size(), " Q-values for ", num_actions_, " actions"));
  }
  const sim::DrivingCarState& car = step.result->car;
  std::string row = absl::StrFormat("%u,%d,%.2f,%.2f,%.4f,%.2f,%.3f,%s,%d", step.seed, step.step,
                                    car.x, car.y, car.yaw, car.speed, car.distance_to_center_m,
                                    sim::RoadPlaceName(map_.PlaceOf({car.x, car.y})), step.action);
  for (float q : q_values) absl::StrAppendFormat(&row, ",%.4f", q);
  absl::StrAppendFormat(&row, ",%.4f,%s\n", step.result->reward,
                        step.result->done ? sim::TerminationReasonName(step.result->reason) : "");
  if (std::fputs(row.c_str(), csv_) < 0) {
    return absl::InternalError(
        absl::StrCat("cannot write ", csv_path_, ": ", std::strerror(errno)));
  }
  if (frames_dir_.empty() || shape_[0] != 3) return absl::OkStatus();
  const size_t size = static_cast<size_t>(shape_[0]) * shape_[1] * shape_[2];
  if (recent_.size() == static_cast<size_t>(kFramesBeforeEnd.front())) {
    recent_.push_back(std::move(recent_.front()));
    recent_.pop_front();
  } else {
    recent_.emplace_back();
  }
  recent_.back().assign(step.frame, step.frame + size);
  if (!step.result->done) return absl::OkStatus();
  absl::Status written =
      sim::IsTruncation(step.result->reason) ? absl::OkStatus() : WriteFrames(step);
  recent_.clear();
  return written;
}

absl::Status EvalTrace::WriteFrames(const EvalStep& step) {
  // Planes (B, G, R) to interleaved BGR rows, the chosen frames one under another.
  const int h = shape_[1], w = shape_[2];
  const size_t plane = static_cast<size_t>(h) * w;
  std::vector<uint8_t> strip;
  int rows = 0;
  for (int back : kFramesBeforeEnd) {
    if (back > static_cast<int>(recent_.size())) continue;
    const std::vector<uint8_t>& frame = recent_[recent_.size() - back];
    for (size_t i = 0; i < plane; ++i) {
      strip.push_back(frame[i]);
      strip.push_back(frame[plane + i]);
      strip.push_back(frame[2 * plane + i]);
    }
    rows += h;
  }
  const std::string path = absl::StrCat(frames_dir_, "/episode-", step.seed, "-",
                                        sim::TerminationReasonName(step.result->reason), ".png");
  return sim::WritePng(path, strip.data(), w, rows, sim::PixelOrder::kBgr);
}

absl::Status EvalTrace::Close() {
  if (csv_ == nullptr) return absl::OkStatus();
  const bool failed = std::fclose(csv_) != 0;
  csv_ = nullptr;
  if (failed) return absl::InternalError(absl::StrCat("cannot write ", csv_path_));
  return absl::OkStatus();
}

}  // namespace convoy::agent
