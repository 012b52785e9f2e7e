// Fuzzes the zero-copy chunk parser (common/wire/tensor_chunk.h) differentially against protobuf: the
// bytes of a GradientChunk or a WeightChunk, as gRPC would hand them over in slices, must parse
// exactly as protobuf parses them, or be refused exactly when protobuf refuses them.
//
// Input: one byte choosing the message (even: GradientChunk, odd: WeightChunk) and a slice-size
// seed, then the message bytes, cut into slices of 1 to 64 bytes by that seed.
//
// Invariants checked, beyond the sanitizers':
// - the parse succeeds if and only if protobuf's ParseFromString succeeds;
// - on success, the header (every field but data, unknown fields included) serialises to the same
// bytes
//   as protobuf's message with data cleared, and data equals protobuf's data byte for byte;
// - the chunk reports the message's size on the wire and has taken the buffer's slices.
#include <google/protobuf/stubs/logging.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/wire/tensor_chunk.h"
#include "convoy/v1/parameter_server.pb.h"
#include "tests/fuzz/fuzz_invariant.h"

namespace convoy {
namespace {

using fuzz::Check;

template <typename Message>
void RunOne(const std::string& bytes, uint8_t seed) {
  std::vector<grpc::Slice> slices;
  uint32_t state = seed | 1u;
  for (size_t at = 0; at < bytes.size();) {
    state = state * 1103515245u + 12345u;
    const size_t n = std::min<size_t>(bytes.size() - at, 1 + (state >> 16) % 64);
    slices.emplace_back(bytes.data() + at, n);
    at += n;
  }
  grpc::ByteBuffer buffer(slices.data(), slices.size());

  IncomingChunk<Message> chunk;
  const bool ours = chunk.Parse(&buffer).ok();
  Message reference;
  const bool protobufs = reference.ParseFromString(bytes);
  Check(ours == protobufs, "accepted by one parser and refused by the other");
  Check(buffer.Length() == 0, "the buffer's slices were not taken");
  if (!ours) {
    Check(!chunk.parse_error().ok(), "a refusal without an error");
    return;
  }
  Check(chunk.data().ToString() == reference.data(), "data differs from protobuf's");
  reference.clear_data();
  Check(chunk.header().SerializeAsString() == reference.SerializeAsString(),
        "the header differs from protobuf's");
  Check(chunk.wire_bytes() == bytes.size(), "wrong size on the wire");
}

}  // namespace
}  // namespace convoy

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool quiet = [] {
    google::protobuf::SetLogHandler(nullptr);  // Protobuf logs each failed UTF-8 check otherwise.
    return true;
  }();
  (void)quiet;
  if (size == 0) return 0;
  const std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0) {
    convoy::RunOne<convoy::v1::GradientChunk>(bytes, data[0]);
  } else {
    convoy::RunOne<convoy::v1::WeightChunk>(bytes, data[0]);
  }
  return 0;
}
