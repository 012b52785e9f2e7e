// Wire encodings of flat fp32 tensors: fp32 as is, or bf16 (round to nearest even) at half the bytes.
#ifndef CONVOY_COMMON_WIRE_TENSOR_ENCODING_H_
#define CONVOY_COMMON_WIRE_TENSOR_ENCODING_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace convoy {

enum class TensorEncoding { kFp32, kBf16 };

// The encoding a flag names: "fp32" or "bf16", parsed once where the flag is read. Errors:
// INVALID_ARGUMENT naming the flag (`flag`, without its dashes) and the values it takes.
absl::StatusOr<TensorEncoding> ParseTensorEncoding(absl::string_view flag, absl::string_view value);

// "fp32" or "bf16": what ParseTensorEncoding reads.
absl::string_view TensorEncodingName(TensorEncoding encoding);

// Chunks carry at most this many payload bytes, so a whole message stays within 1 MiB.
inline constexpr size_t kMaxChunkPayloadBytes = (1 << 20) - 1024;

size_t BytesPerElement(TensorEncoding encoding);

// Elements per chunk for `encoding`, so that a chunk's payload fits kMaxChunkPayloadBytes.
size_t ElementsPerChunk(TensorEncoding encoding);

// Appends `count` elements of `values`, encoded, to `out`.
void EncodeTensor(const float* values, size_t count, TensorEncoding encoding, std::string* out);

// Writes `count` elements of `values`, encoded, to `out[0 .. count * BytesPerElement(encoding))`.
void EncodeTensorTo(const float* values, size_t count, TensorEncoding encoding, char* out);

// Decodes `bytes` into `out[0..n)` where n = bytes.size() / BytesPerElement. Errors: INVALID_ARGUMENT when
// the byte count is not a whole number of elements or exceeds `capacity`.
absl::Status DecodeTensor(absl::string_view bytes, TensorEncoding encoding, float* out,
                          size_t capacity, size_t* decoded);

// The encoded bytes of one payload as the pieces it arrived in (a received message's slices), read in
// place: nothing is copied until Decode writes the elements to their destination. Does not own the bytes.
// Piece boundaries may fall inside an element.
class TensorBytes {
 public:
  TensorBytes() = default;
  explicit TensorBytes(absl::string_view whole) { Append(whole); }

  void Append(absl::string_view piece);
  void Clear();
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const std::vector<absl::string_view>& pieces() const { return pieces_; }
  std::string ToString() const;

  // DecodeTensor over all pieces, with the same errors.
  absl::Status Decode(TensorEncoding encoding, float* out, size_t capacity, size_t* decoded) const;

 private:
  std::vector<absl::string_view> pieces_;
  size_t size_ = 0;
};

// True when every value is finite (no NaN, no Inf).
bool AllFinite(const float* values, size_t count);

}  // namespace convoy

#endif  // CONVOY_COMMON_WIRE_TENSOR_ENCODING_H_
