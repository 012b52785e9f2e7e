// Preprocess: from the environment's frame to the model's input frame, by integer average pooling.
//
// The environment renders what AirSim would (the cookbook crop, 3x59x255); a model may want fewer pixels
// ("compact": 3x14x63). Preprocess pools fy x fx blocks (fy = floor(H / h), fx = floor(W / w)) of the top-left
// h*fy x w*fx region, channel by channel. With equal shapes it is a copy.
#ifndef CONVOY_AGENT_ENVIRONMENT_PREPROCESS_H_
#define CONVOY_AGENT_ENVIRONMENT_PREPROCESS_H_

#include <array>
#include <cstdint>

#include "absl/status/statusor.h"

namespace convoy::agent {

class Preprocess {
 public:
  // `in` and `out` are {C, H, W}. Errors: INVALID_ARGUMENT when channels differ or `out` is larger than `in`.
  static absl::StatusOr<Preprocess> Create(std::array<int, 3> in, std::array<int, 3> out);

  // Writes one output frame (CHW uint8) from one input frame. Allocation-free.
  void Apply(const uint8_t* in, uint8_t* out) const;

  size_t input_size() const { return static_cast<size_t>(in_[0]) * in_[1] * in_[2]; }
  size_t output_size() const { return static_cast<size_t>(out_[0]) * out_[1] * out_[2]; }
  std::array<int, 3> output_shape() const { return out_; }

 private:
  Preprocess(std::array<int, 3> in, std::array<int, 3> out, int fy, int fx)
      : in_(in), out_(out), fy_(fy), fx_(fx) {}
  std::array<int, 3> in_, out_;
  int fy_, fx_;
};

}  // namespace convoy::agent

#endif  // CONVOY_AGENT_ENVIRONMENT_PREPROCESS_H_
