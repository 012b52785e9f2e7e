// Wire encodings of flat fp32 tensors: fp32 as is, or bf16 (round to nearest even) at half the bytes.
#ifndef CONVOY_COMMON_TENSOR_ENCODING_H_
#define CONVOY_COMMON_TENSOR_ENCODING_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace convoy {

enum class TensorEncoding { kFp32, kBf16 };

// Chunks carry at most this many payload bytes, so a whole message stays within 1 MiB.
inline constexpr size_t kMaxChunkPayloadBytes = (1 << 20) - 1024;

size_t BytesPerElement(TensorEncoding encoding);

// Elements per chunk for `encoding`, so that a chunk's payload fits kMaxChunkPayloadBytes.
size_t ElementsPerChunk(TensorEncoding encoding);

// Appends `count` elements of `values`, encoded, to `out`.
void EncodeTensor(const float* values, size_t count, TensorEncoding encoding, std::string* out);

// Decodes `bytes` into `out[0..n)` where n = bytes.size() / BytesPerElement. Errors: INVALID_ARGUMENT when
// the byte count is not a whole number of elements or exceeds `capacity`.
absl::Status DecodeTensor(absl::string_view bytes, TensorEncoding encoding, float* out,
                          size_t capacity, size_t* decoded);

// True when every value is finite (no NaN, no Inf).
bool AllFinite(const float* values, size_t count);

}  // namespace convoy

#endif  // CONVOY_COMMON_TENSOR_ENCODING_H_
