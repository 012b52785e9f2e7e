#include "agent/environment/preprocess.h"

#include "absl/strings/str_cat.h"

namespace convoy::agent {

absl::StatusOr<Preprocess> Preprocess::Create(std::array<int, 3> in, std::array<int, 3> out) {
  if (in[0] != out[0] || out[1] < 1 || out[2] < 1 || out[1] > in[1] || out[2] > in[2]) {
    return absl::InvalidArgumentError(absl::StrCat("cannot pool a ", in[0], "x", in[1], "x", in[2],
                                                   " frame into ", out[0], "x", out[1], "x", out[2]));
  }
  return Preprocess(in, out, in[1] / out[1], in[2] / out[2]);
}

void Preprocess::Apply(const uint8_t* in, uint8_t* out) const {
  const int area = fy_ * fx_;
  for (int c = 0; c < out_[0]; ++c) {
    const uint8_t* plane = in + static_cast<size_t>(c) * in_[1] * in_[2];
    for (int y = 0; y < out_[1]; ++y) {
      for (int x = 0; x < out_[2]; ++x) {
        int sum = 0;
        for (int dy = 0; dy < fy_; ++dy) {
          const uint8_t* row = plane + static_cast<size_t>(y * fy_ + dy) * in_[2] + x * fx_;
          for (int dx = 0; dx < fx_; ++dx) sum += row[dx];
        }
        *out++ = static_cast<uint8_t>((sum + area / 2) / area);
      }
    }
  }
}

}  // namespace convoy::agent
