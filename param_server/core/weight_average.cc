#include "param_server/core/weight_average.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"

namespace convoy::ps {

WeightAverage::WeightAverage(uint64_t horizon, std::vector<float> initial, uint64_t version,
                             uint64_t applied_minibatches)
    : horizon_(std::max<uint64_t>(horizon, 1)),
      average_(std::move(initial)),
      version_(version),
      minibatches_at_fold_(applied_minibatches) {
  Publish(version);
}

double WeightAverage::FoldWeight(uint64_t horizon, uint64_t covered, uint64_t delta) {
  if (delta == 0) return 0;
  const double d = static_cast<double>(delta);
  // 1 - (1 - 1/h)^Δ, without the cancellation of 1 - pow() for a long horizon.
  const double exponential = -std::expm1(d * std::log1p(-1.0 / static_cast<double>(horizon)));
  const double mean = d / (static_cast<double>(covered) + d);
  return std::max(exponential, mean);
}

bool WeightAverage::Fold(const WeightSnapshot& weights, uint64_t applied_minibatches) {
  if (weights.version == version_ || applied_minibatches <= minibatches_at_fold_ ||
      weights.values.size() != average_.size()) {
    return false;
  }
  const uint64_t delta = applied_minibatches - minibatches_at_fold_;
  const float alpha = static_cast<float>(FoldWeight(horizon_, covered_, delta));
  const float* w = weights.values.data();
  for (size_t i = 0; i < average_.size(); ++i) average_[i] += alpha * (w[i] - average_[i]);
  covered_ += delta;
  minibatches_at_fold_ = applied_minibatches;
  version_ = weights.version;
  Publish(version_);
  return true;
}

absl::Status WeightAverage::Restore(std::vector<float> values, uint64_t version, uint64_t covered,
                                    uint64_t minibatches_at_fold) {
  if (values.size() != average_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("the averaged weights hold ", values.size(),
                                                   " values, the model ", average_.size()));
  }
  average_ = std::move(values);
  version_ = version;
  covered_ = covered;
  minibatches_at_fold_ = minibatches_at_fold;
  Publish(version);
  return absl::OkStatus();
}

void WeightAverage::Publish(uint64_t version) {
  auto snapshot = std::make_shared<WeightSnapshot>();
  snapshot->version = version;
  snapshot->values = average_;
  published_ = std::move(snapshot);
}

absl::Status WeightAverage::Restore(const v1::CheckpointManifest& manifest,
                                    std::vector<float> values) {
  return Restore(std::move(values), manifest.average_version(), manifest.average_minibatches(),
                 manifest.minibatches_at_average());
}

void WeightAverage::SaveTo(CheckpointData& data) const {
  data.average = published_;
  data.manifest.set_average_version(published_->version);
  data.manifest.set_average_minibatches(covered_);
  data.manifest.set_minibatches_at_average(minibatches_at_fold_);
}

}  // namespace convoy::ps
