#include "common/tensor_encoding.h"

#include <c10/util/BFloat16.h>

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace convoy {

static_assert(sizeof(c10::BFloat16) == 2, "bf16 is two bytes on the wire");

size_t BytesPerElement(TensorEncoding encoding) {
  return encoding == TensorEncoding::kBf16 ? sizeof(c10::BFloat16) : sizeof(float);
}

size_t ElementsPerChunk(TensorEncoding encoding) {
  return kMaxChunkPayloadBytes / BytesPerElement(encoding);
}

void EncodeTensor(const float* values, size_t count, TensorEncoding encoding, std::string* out) {
  if (count == 0) return;  // `values` may be null then; memcpy must not see it.
  const size_t start = out->size();
  out->resize(start + count * BytesPerElement(encoding));
  char* dst = out->data() + start;
  if (encoding == TensorEncoding::kFp32) {
    std::memcpy(dst, values, count * sizeof(float));
    return;
  }
  for (size_t i = 0; i < count; ++i) {
    const c10::BFloat16 b(values[i]);  // Round to nearest even.
    std::memcpy(dst + i * sizeof(b), &b.x, sizeof(b.x));
  }
}

absl::Status DecodeTensor(absl::string_view bytes, TensorEncoding encoding, float* out,
                          size_t capacity, size_t* decoded) {
  const size_t width = BytesPerElement(encoding);
  if (bytes.size() % width != 0) {
    return absl::InvalidArgumentError(absl::StrCat("chunk of ", bytes.size(),
                                                   " bytes is not a whole number of ", width,
                                                   "-byte elements"));
  }
  const size_t count = bytes.size() / width;
  if (count > capacity) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunk of ", count, " elements overruns the tensor by ", count - capacity));
  }
  if (encoding == TensorEncoding::kFp32) {
    std::memcpy(out, bytes.data(), bytes.size());
  } else {
    for (size_t i = 0; i < count; ++i) {
      c10::BFloat16 b;
      // A compile-time length lets the compiler vectorise this loop (a runtime one made it 80x slower).
      std::memcpy(&b.x, bytes.data() + i * sizeof(b.x), sizeof(b.x));
      out[i] = static_cast<float>(b);
    }
  }
  *decoded = count;
  return absl::OkStatus();
}

bool AllFinite(const float* values, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    if (!std::isfinite(values[i])) return false;
  }
  return true;
}

}  // namespace convoy
