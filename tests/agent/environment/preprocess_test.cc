#include "agent/environment/preprocess.h"

#include <vector>

#include "tests/catch.h"

namespace convoy::agent {
namespace {

TEST_CASE("Preprocess averages whole blocks channel by channel", "[preprocess]") {
  // 2 channels of 4x6 pooled to 2x3: 2x2 blocks.
  std::vector<uint8_t> in(2 * 4 * 6);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<uint8_t>(i);
  absl::StatusOr<Preprocess> pool = Preprocess::Create({2, 4, 6}, {2, 2, 3});
  REQUIRE(pool.ok());
  std::vector<uint8_t> out(pool->output_size());
  pool->Apply(in.data(), out.data());
  // Block (0,0) of channel 0 holds 0, 1, 6, 7: mean 3.5, rounded half up to 4.
  CHECK(out[0] == 4);
  // Block (1,2) of channel 1 holds 24 + {16, 17, 22, 23}: mean 43.5, rounded to 44.
  CHECK(out[2 * 3 + 1 * 3 + 2] == (40 + 41 + 46 + 47 + 2) / 4);
}

TEST_CASE("The cookbook crop pools 4x4 into the compact model's input", "[preprocess]") {
  absl::StatusOr<Preprocess> pool = Preprocess::Create({3, 59, 255}, {3, 14, 63});
  REQUIRE(pool.ok());
  std::vector<uint8_t> in(pool->input_size(), 200), out(pool->output_size());
  pool->Apply(in.data(), out.data());
  CHECK(std::all_of(out.begin(), out.end(), [](uint8_t v) { return v == 200; }));
}

TEST_CASE("Equal shapes copy and impossible shapes are refused", "[preprocess]") {
  absl::StatusOr<Preprocess> same = Preprocess::Create({1, 3, 3}, {1, 3, 3});
  REQUIRE(same.ok());
  std::vector<uint8_t> in = {1, 2, 3, 4, 5, 6, 7, 8, 9}, out(9);
  same->Apply(in.data(), out.data());
  CHECK(out == in);
  CHECK(Preprocess::Create({3, 10, 10}, {1, 5, 5}).status().code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(Preprocess::Create({3, 10, 10}, {3, 20, 5}).status().code() ==
        absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace convoy::agent
