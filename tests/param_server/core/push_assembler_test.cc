#include "param_server/core/push_assembler.h"

#include <limits>

#include "tests/catch.h"

namespace convoy::ps {
namespace {

constexpr char kFingerprint[] = "tiny-0123456789abcdef";
constexpr size_t kCount = 10;

v1::GradientChunk Header(uint64_t offset, const std::vector<float>& values) {
  v1::GradientChunk chunk;
  chunk.set_agent_id("a");
  chunk.set_base_version(3);
  chunk.set_encoding(v1::ENCODING_FP32);
  chunk.set_minibatch_count(2);
  chunk.set_model_fingerprint(kFingerprint);
  chunk.set_total_elements(kCount);
  chunk.set_offset(offset);
  EncodeTensor(values.data(), values.size(), TensorEncoding::kFp32, chunk.mutable_data());
  return chunk;
}

v1::GradientChunk Body(uint64_t offset, const std::vector<float>& values) {
  v1::GradientChunk chunk;
  chunk.set_offset(offset);
  EncodeTensor(values.data(), values.size(), TensorEncoding::kFp32, chunk.mutable_data());
  return chunk;
}

TEST_CASE("A well-formed chunked push assembles into the whole tensor", "[push]") {
  PushAssembler push(kFingerprint, kCount);
  REQUIRE(push.Add(Header(0, {0, 1, 2, 3})).ok());
  REQUIRE(push.Add(Body(4, {4, 5, 6})).ok());
  REQUIRE(push.Add(Body(7, {7, 8, 9})).ok());
  REQUIRE(push.Finish().ok());
  CHECK(push.values() == std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  CHECK(push.agent_id() == "a");
  CHECK(push.base_version() == 3);
  CHECK(push.minibatch_count() == 2);
}

TEST_CASE("bf16 pushes decode to fp32", "[push]") {
  PushAssembler push(kFingerprint, kCount);
  v1::GradientChunk chunk = Header(0, {});
  chunk.set_encoding(v1::ENCODING_BF16);
  const std::vector<float> values(kCount, 0.5f);
  EncodeTensor(values.data(), kCount, TensorEncoding::kBf16, chunk.mutable_data());
  REQUIRE(push.Add(chunk).ok());
  REQUIRE(push.Finish().ok());
  CHECK(push.values() == values);
}

struct BadCase {
  const char* what;
  absl::StatusCode code;
  v1::RejectReason reason;
};

void ExpectRejected(PushAssembler& push, absl::Status status, absl::StatusCode code,
                    v1::RejectReason reason) {
  CHECK(status.code() == code);
  CHECK(push.reason() == reason);
}

TEST_CASE("Every kind of bad push gets its status and reason", "[push]") {
  const std::vector<float> four = {1, 2, 3, 4};
  PushAssembler push(kFingerprint, kCount);

  SECTION("unknown fingerprint: FAILED_PRECONDITION naming both") {
    v1::GradientChunk chunk = Header(0, four);
    chunk.set_model_fingerprint("nature-ffff");
    absl::Status s = push.Add(chunk);
    ExpectRejected(push, s, absl::StatusCode::kFailedPrecondition,
                   v1::REJECT_REASON_FINGERPRINT_MISMATCH);
    CHECK_THAT(std::string(s.message()), Catch::Matchers::ContainsSubstring("nature-ffff") &&
                                             Catch::Matchers::ContainsSubstring(kFingerprint));
  }
  SECTION("wrong total size") {
    v1::GradientChunk chunk = Header(0, four);
    chunk.set_total_elements(kCount + 1);
    ExpectRejected(push, push.Add(chunk), absl::StatusCode::kInvalidArgument,
                   v1::REJECT_REASON_WRONG_SIZE);
  }
  SECTION("data past the declared size") {
    REQUIRE(push.Add(Header(0, four)).ok());
    REQUIRE(push.Add(Body(4, four)).ok());
    ExpectRejected(push, push.Add(Body(8, four)), absl::StatusCode::kInvalidArgument,
                   v1::REJECT_REASON_WRONG_SIZE);
  }
  SECTION("unknown encoding") {
    v1::GradientChunk chunk = Header(0, four);
    chunk.set_encoding(static_cast<v1::Encoding>(9));
    ExpectRejected(push, push.Add(chunk), absl::StatusCode::kInvalidArgument,
                   v1::REJECT_REASON_UNKNOWN_ENCODING);
  }
  SECTION("unspecified encoding") {
    v1::GradientChunk chunk = Header(0, four);
    chunk.set_encoding(v1::ENCODING_UNSPECIFIED);
    ExpectRejected(push, push.Add(chunk), absl::StatusCode::kInvalidArgument,
                   v1::REJECT_REASON_UNKNOWN_ENCODING);
  }
  SECTION("overlapping chunks") {
    REQUIRE(push.Add(Header(0, four)).ok());
    ExpectRejected(push, push.Add(Body(2, four)), absl::StatusCode::kInvalidArgument,
                   v1::REJECT_REASON_BAD_CHUNKS);
  }
  SECTION("a gap between chunks") {
    REQUIRE(push.Add(Header(0, four)).ok());
    absl::Status s = push.Add(Body(6, four));
    ExpectRejected(push, s, absl::StatusCode::kInvalidArgument, v1::REJECT_REASON_BAD_CHUNKS);
    CHECK_THAT(std::string(s.message()), Catch::Matchers::ContainsSubstring("[4, 6) are missing"));
  }
  SECTION("missing elements at the end") {
    REQUIRE(push.Add(Header(0, four)).ok());
    ExpectRejected(push, push.Finish(), absl::StatusCode::kInvalidArgument,
                   v1::REJECT_REASON_BAD_CHUNKS);
  }
  SECTION("a ragged byte count") {
    v1::GradientChunk chunk = Header(0, four);
    chunk.mutable_data()->push_back('x');
    ExpectRejected(push, push.Add(chunk), absl::StatusCode::kInvalidArgument,
                   v1::REJECT_REASON_BAD_CHUNKS);
  }
  SECTION("an oversized chunk") {
    v1::GradientChunk chunk = Header(0, {});
    chunk.mutable_data()->assign(kMaxChunkPayloadBytes + 4, '\0');
    PushAssembler big(kFingerprint, 1 << 20);
    chunk.set_total_elements(1 << 20);
    ExpectRejected(big, big.Add(chunk), absl::StatusCode::kInvalidArgument,
                   v1::REJECT_REASON_BAD_CHUNKS);
  }
  SECTION("NaN") {
    std::vector<float> values(kCount, 1.f);
    values[7] = std::numeric_limits<float>::quiet_NaN();
    REQUIRE(push.Add(Header(0, values)).ok());
    ExpectRejected(push, push.Finish(), absl::StatusCode::kInvalidArgument,
                   v1::REJECT_REASON_NON_FINITE);
  }
  SECTION("Inf") {
    std::vector<float> values(kCount, 1.f);
    values[0] = std::numeric_limits<float>::infinity();
    REQUIRE(push.Add(Header(0, values)).ok());
    ExpectRejected(push, push.Finish(), absl::StatusCode::kInvalidArgument,
                   v1::REJECT_REASON_NON_FINITE);
  }
  SECTION("an empty stream") {
    ExpectRejected(push, push.Finish(), absl::StatusCode::kInvalidArgument,
                   v1::REJECT_REASON_EMPTY);
  }
  SECTION("a header that changes between chunks") {
    REQUIRE(push.Add(Header(0, four)).ok());
    v1::GradientChunk chunk = Body(4, four);
    chunk.set_base_version(4);
    ExpectRejected(push, push.Add(chunk), absl::StatusCode::kInvalidArgument,
                   v1::REJECT_REASON_INVALID);
  }
  SECTION("zero minibatches") {
    v1::GradientChunk chunk = Header(0, four);
    chunk.set_minibatch_count(0);
    ExpectRejected(push, push.Add(chunk), absl::StatusCode::kInvalidArgument,
                   v1::REJECT_REASON_INVALID);
  }
}

TEST_CASE("After a rejection the assembler accepts nothing more", "[push]") {
  PushAssembler push(kFingerprint, kCount);
  v1::GradientChunk chunk = Header(0, {1, 2});
  chunk.set_total_elements(1);
  REQUIRE_FALSE(push.Add(chunk).ok());
  CHECK_FALSE(push.Add(Body(0, {1})).ok());
  CHECK_FALSE(push.Finish().ok());
}

}  // namespace
}  // namespace convoy::ps
