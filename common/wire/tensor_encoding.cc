#include "common/wire/tensor_encoding.h"

#include <c10/util/BFloat16.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace convoy {

static_assert(sizeof(c10::BFloat16) == 2, "bf16 is two bytes on the wire");

absl::StatusOr<TensorEncoding> ParseTensorEncoding(absl::string_view flag,
                                                   absl::string_view value) {
  if (value == "fp32") return TensorEncoding::kFp32;
  if (value == "bf16") return TensorEncoding::kBf16;
  return absl::InvalidArgumentError(
      absl::StrCat("--", flag, " must be fp32 or bf16, got '", value, "'"));
}

absl::string_view TensorEncodingName(TensorEncoding encoding) {
  return encoding == TensorEncoding::kBf16 ? "bf16" : "fp32";
}

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
  EncodeTensorTo(values, count, encoding, out->data() + start);
}

void EncodeTensorTo(const float* values, size_t count, TensorEncoding encoding, char* dst) {
  if (count == 0) return;
  if (encoding == TensorEncoding::kFp32) {
    std::memcpy(dst, values, count * sizeof(float));
    return;
  }
  for (size_t i = 0; i < count; ++i) {
    const c10::BFloat16 b(values[i]);  // Round to nearest even.
    std::memcpy(dst + i * sizeof(b), &b.x, sizeof(b.x));
  }
}

namespace {

// The elements `bytes` of payload hold. Errors: INVALID_ARGUMENT for a ragged payload or one that
// overruns `capacity`.
absl::StatusOr<size_t> PayloadElements(size_t bytes, TensorEncoding encoding, size_t capacity) {
  const size_t width = BytesPerElement(encoding);
  if (bytes % width != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "chunk of ", bytes, " bytes is not a whole number of ", width, "-byte elements"));
  }
  const size_t count = bytes / width;
  if (count > capacity) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunk of ", count, " elements overruns the tensor by ", count - capacity));
  }
  return count;
}

}  // namespace

absl::Status DecodeTensor(absl::string_view bytes, TensorEncoding encoding, float* out,
                          size_t capacity, size_t* decoded) {
  const absl::StatusOr<size_t> elements = PayloadElements(bytes.size(), encoding, capacity);
  if (!elements.ok()) return elements.status();
  const size_t count = *elements;
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

void TensorBytes::Append(absl::string_view piece) {
  if (piece.empty()) return;
  pieces_.push_back(piece);
  size_ += piece.size();
}

void TensorBytes::Clear() {
  pieces_.clear();
  size_ = 0;
}

std::string TensorBytes::ToString() const {
  std::string whole;
  whole.reserve(size_);
  for (absl::string_view piece : pieces_) whole.append(piece.data(), piece.size());
  return whole;
}

absl::Status TensorBytes::Decode(TensorEncoding encoding, float* out, size_t capacity,
                                 size_t* decoded) const {
  if (pieces_.size() == 1) return DecodeTensor(pieces_[0], encoding, out, capacity, decoded);
  const size_t width = BytesPerElement(encoding);
  // The whole payload's checks first, so an error leaves `out` as it was.
  const absl::StatusOr<size_t> elements = PayloadElements(size_, encoding, capacity);
  if (!elements.ok()) return elements.status();
  const size_t count = *elements;
  if (encoding == TensorEncoding::kFp32) {
    char* dst = reinterpret_cast<char*>(out);
    for (absl::string_view piece : pieces_) {
      std::memcpy(dst, piece.data(), piece.size());
      dst += piece.size();
    }
    *decoded = count;
    return absl::OkStatus();
  }
  // bf16: whole elements straight from each piece; an element split across two pieces goes through `split`.
  size_t written = 0;
  char split[2];
  size_t split_bytes = 0;
  for (absl::string_view piece : pieces_) {
    if (split_bytes == 1) {
      split[1] = piece[0];
      size_t one = 0;
      (void)DecodeTensor(absl::string_view(split, 2), encoding, out + written, 1, &one);
      written += one;
      split_bytes = 0;
      piece.remove_prefix(1);
    }
    const size_t whole = piece.size() / width * width;
    size_t n = 0;
    (void)DecodeTensor(piece.substr(0, whole), encoding, out + written, capacity - written, &n);
    written += n;
    if (whole < piece.size()) {
      split[0] = piece[whole];
      split_bytes = 1;
    }
  }
  *decoded = written;
  return absl::OkStatus();
}

bool AllFinite(const float* values, size_t count) {
  // A value is NaN or Inf when its exponent bits are all ones. Blocks without a branch inside, so the
  // compiler vectorises them (std::isfinite with an early exit per element did not vectorise: 5% of the
  // server's time at 16 clients).
  constexpr uint32_t kExponent = 0x7f800000u;
  constexpr size_t kBlock = 4096;
  for (size_t start = 0; start < count; start += kBlock) {
    const size_t end = std::min(count, start + kBlock);
    uint32_t non_finite = 0;
    for (size_t i = start; i < end; ++i) {
      uint32_t bits;
      std::memcpy(&bits, values + i, sizeof(bits));
      non_finite |= static_cast<uint32_t>((bits & kExponent) == kExponent);
    }
    if (non_finite != 0) return false;
  }
  return true;
}

}  // namespace convoy
