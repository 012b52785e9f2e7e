// Fuzzes the parameter server's push validation and chunk assembly: a PushGradients stream as the
// service sees it, chunk by chunk, into PushAssembler.
//
// Input: one byte choosing the model size (1 + byte % 64 elements), then records of a 2-byte
// little-endian length and that many bytes of a protobuf-encoded convoy.v1.GradientChunk. A record
// that does not parse is dropped, as gRPC would refuse it before the service sees it.
//
// Invariants checked, beyond the sanitizers':
// - after an error no further Add or Finish succeeds, and the reject reason stays put;
// - an error always names a reason, a success never does;
// - a successful Finish holds exactly parameter_count finite values, and they are the chunks'
//   payloads decoded in order (checked against an independent decoder).
#include <google/protobuf/stubs/logging.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "convoy/v1/parameter_server.pb.h"
#include "param_server/core/push_assembler.h"
#include "tests/fuzz/fuzz_invariant.h"

namespace convoy {
namespace {

constexpr char kFingerprint[] = "fuzz-model";
constexpr size_t kMaxParameters = 64;

using fuzz::Check;

// Decodes one element by hand: fp32 is the little-endian IEEE float, bf16 its upper 16 bits.
float DecodeElement(const char* p, v1::Encoding encoding) {
  uint32_t bits = 0;
  if (encoding == v1::ENCODING_BF16) {
    uint16_t half;
    std::memcpy(&half, p, sizeof(half));
    bits = static_cast<uint32_t>(half) << 16;
  } else {
    std::memcpy(&bits, p, sizeof(bits));
  }
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

bool SameBits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

void RunOne(const uint8_t* data, size_t size) {
  if (size == 0) return;
  const size_t parameter_count = 1 + data[0] % kMaxParameters;
  ps::PushAssembler assembler(kFingerprint, parameter_count);

  bool failed = false;
  v1::RejectReason failed_reason = v1::REJECT_REASON_UNSPECIFIED;
  v1::Encoding encoding = v1::ENCODING_UNSPECIFIED;
  std::string payload;  // every accepted chunk's data, in order

  size_t pos = 1;
  while (pos + 2 <= size) {
    const size_t length = data[pos] | (static_cast<size_t>(data[pos + 1]) << 8);
    pos += 2;
    const size_t take = std::min(length, size - pos);
    v1::GradientChunk chunk;
    const bool parsed = chunk.ParseFromArray(data + pos, static_cast<int>(take));
    pos += take;
    if (!parsed) continue;

    const absl::Status status = assembler.Add(chunk);
    if (failed) {
      Check(!status.ok(), "Add succeeded after an error");
      Check(assembler.reason() == failed_reason, "the reject reason changed after an error");
      continue;
    }
    if (status.ok()) {
      Check(assembler.reason() == v1::REJECT_REASON_UNSPECIFIED, "a success set a reject reason");
      if (encoding == v1::ENCODING_UNSPECIFIED) encoding = chunk.encoding();
      payload += chunk.data();
    } else {
      Check(assembler.reason() != v1::REJECT_REASON_UNSPECIFIED, "an error without a reason");
      failed = true;
      failed_reason = assembler.reason();
    }
  }

  const absl::Status finished = assembler.Finish();
  if (failed) {
    Check(!finished.ok(), "Finish succeeded after an error");
    Check(assembler.reason() == failed_reason, "Finish changed the reject reason");
    return;
  }
  if (!finished.ok()) {
    Check(assembler.reason() != v1::REJECT_REASON_UNSPECIFIED, "Finish failed without a reason");
    Check(!assembler.Finish().ok(), "a second Finish succeeded after a failed one");
    return;
  }
  const std::vector<float>& values = assembler.values();
  Check(values.size() == parameter_count, "a finished push does not have parameter_count values");
  Check(assembler.chunks() >= 1, "a finished push without chunks");
  Check(assembler.minibatch_count() >= 1, "a finished push with minibatch_count 0");
  const size_t width = encoding == v1::ENCODING_BF16 ? 2 : 4;
  Check(payload.size() == parameter_count * width, "accepted payload bytes do not match the model");
  for (size_t i = 0; i < parameter_count; ++i) {
    Check(std::isfinite(values[i]), "a finished push holds a non-finite value");
    Check(SameBits(values[i], DecodeElement(payload.data() + i * width, encoding)),
          "a finished push's values differ from its chunks' payloads");
  }
}

}  // namespace
}  // namespace convoy

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // Parsing logs every proto3 string that is not UTF-8; a fuzzer makes millions of them.
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  convoy::RunOne(data, size);
  return 0;
}
