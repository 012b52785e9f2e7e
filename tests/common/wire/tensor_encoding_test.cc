#include "common/wire/tensor_encoding.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/catch.h"

namespace convoy {
namespace {

TEST_CASE("fp32 encoding round-trips bit for bit", "[encoding]") {
  const std::vector<float> values = {0.f, -1.5f, 3.14159f, 1e-30f, -7e20f};
  std::string bytes;
  EncodeTensor(values.data(), values.size(), TensorEncoding::kFp32, &bytes);
  REQUIRE(bytes.size() == values.size() * 4);
  std::vector<float> out(values.size());
  size_t decoded = 0;
  REQUIRE(DecodeTensor(bytes, TensorEncoding::kFp32, out.data(), out.size(), &decoded).ok());
  CHECK(decoded == values.size());
  CHECK(out == values);
}

TEST_CASE("bf16 encoding halves the bytes and keeps 8 significant bits", "[encoding]") {
  const std::vector<float> values = {1.f, -2.f, 0.15625f, 3.14159f, -1234.5678f, 1e-3f};
  std::string bytes;
  EncodeTensor(values.data(), values.size(), TensorEncoding::kBf16, &bytes);
  REQUIRE(bytes.size() == values.size() * 2);
  std::vector<float> out(values.size());
  size_t decoded = 0;
  REQUIRE(DecodeTensor(bytes, TensorEncoding::kBf16, out.data(), out.size(), &decoded).ok());
  // Exactly representable values survive unchanged; the rest within half a unit in the 8th bit.
  CHECK(out[0] == 1.f);
  CHECK(out[1] == -2.f);
  CHECK(out[2] == 0.15625f);
  for (size_t i = 0; i < values.size(); ++i) {
    CHECK(std::fabs(out[i] - values[i]) <= std::fabs(values[i]) * std::ldexp(1.0, -8));
  }
}

TEST_CASE("bf16 rounds to nearest, ties to even", "[encoding]") {
  auto from_bits = [](uint32_t bits) {
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  };
  auto round_trip = [](float f) {
    std::string bytes;
    EncodeTensor(&f, 1, TensorEncoding::kBf16, &bytes);
    uint16_t b;
    std::memcpy(&b, bytes.data(), 2);
    return b;
  };
  CHECK(round_trip(from_bits(0x3F808000)) == 0x3F80);  // Tie, even below: down.
  CHECK(round_trip(from_bits(0x3F818000)) == 0x3F82);  // Tie, odd below: up.
  CHECK(round_trip(from_bits(0x3F808001)) == 0x3F81);  // Above the tie: up.
}

TEST_CASE("Decoding refuses ragged and overrunning chunks", "[encoding]") {
  std::vector<float> out(2);
  size_t decoded = 0;
  CHECK(DecodeTensor(std::string(7, '\0'), TensorEncoding::kFp32, out.data(), 2, &decoded).code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(DecodeTensor(std::string(12, '\0'), TensorEncoding::kFp32, out.data(), 2, &decoded)
            .code() == absl::StatusCode::kInvalidArgument);
  CHECK(DecodeTensor(std::string(3, '\0'), TensorEncoding::kBf16, out.data(), 2, &decoded).code() ==
        absl::StatusCode::kInvalidArgument);
}

TEST_CASE("A chunk's payload never exceeds 1 MiB", "[encoding]") {
  for (TensorEncoding e : {TensorEncoding::kFp32, TensorEncoding::kBf16}) {
    CHECK(ElementsPerChunk(e) * BytesPerElement(e) <= kMaxChunkPayloadBytes);
    CHECK(kMaxChunkPayloadBytes < (1u << 20));
  }
}

TEST_CASE("AllFinite finds NaN and Inf", "[encoding]") {
  std::vector<float> v = {1.f, 2.f, 3.f};
  CHECK(AllFinite(v.data(), v.size()));
  v[1] = std::numeric_limits<float>::quiet_NaN();
  CHECK_FALSE(AllFinite(v.data(), v.size()));
  v[1] = -std::numeric_limits<float>::infinity();
  CHECK_FALSE(AllFinite(v.data(), v.size()));
}

TEST_CASE("An encoding flag's value names fp32 or bf16", "[encoding]") {
  CHECK(ParseTensorEncoding("push_encoding", "fp32").value() == TensorEncoding::kFp32);
  CHECK(ParseTensorEncoding("push_encoding", "bf16").value() == TensorEncoding::kBf16);
  for (TensorEncoding e : {TensorEncoding::kFp32, TensorEncoding::kBf16}) {
    CHECK(ParseTensorEncoding("encoding", TensorEncodingName(e)).value() == e);
  }
}

TEST_CASE("An unknown encoding is refused, naming the flag and the values it takes", "[encoding]") {
  for (const char* value : {"fp16", "", "FP32", "bf16 "}) {
    INFO(value);
    absl::StatusOr<TensorEncoding> parsed = ParseTensorEncoding("encoding", value);
    REQUIRE_FALSE(parsed.ok());
    CHECK(parsed.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK(parsed.status().message() ==
          absl::StrCat("--encoding must be fp32 or bf16, got '", value, "'"));
  }
}

}  // namespace
}  // namespace convoy
