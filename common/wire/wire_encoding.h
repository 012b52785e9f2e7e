// TensorEncoding and convoy.v1.Encoding, mapped once each way. Header-only so that both the
// transport-free server core and the gRPC transport use it without a library between them: it needs
// only convoy_tensor_encoding and convoy_proto, which both already link.
#ifndef CONVOY_COMMON_WIRE_WIRE_ENCODING_H_
#define CONVOY_COMMON_WIRE_WIRE_ENCODING_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/wire/tensor_encoding.h"
#include "convoy/v1/parameter_server.pb.h"

namespace convoy {

// What ENCODING_UNSPECIFIED means where a wire encoding is read: a push must name its encoding; a
// pull request or a weight chunk that names none means fp32 (parameter_server.proto).
enum class UnspecifiedEncoding { kRefused, kFp32 };

// The wire enum for `encoding`.
inline v1::Encoding ToWireEncoding(TensorEncoding encoding) {
  return encoding == TensorEncoding::kBf16 ? v1::ENCODING_BF16 : v1::ENCODING_FP32;
}

// The encoding a wire value names. Errors: INVALID_ARGUMENT naming the value, for a value
// convoy.v1.Encoding does not define and for ENCODING_UNSPECIFIED when `unspecified` is kRefused.
inline absl::StatusOr<TensorEncoding> FromWireEncoding(v1::Encoding wire,
                                                       UnspecifiedEncoding unspecified) {
  switch (wire) {
    case v1::ENCODING_FP32:
      return TensorEncoding::kFp32;
    case v1::ENCODING_BF16:
      return TensorEncoding::kBf16;
    case v1::ENCODING_UNSPECIFIED:
      if (unspecified == UnspecifiedEncoding::kFp32) return TensorEncoding::kFp32;
      break;
    default:
      break;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown encoding ", static_cast<int>(wire),
                                                 "; expected ENCODING_FP32 or ENCODING_BF16"));
}

}  // namespace convoy

#endif  // CONVOY_COMMON_WIRE_WIRE_ENCODING_H_
