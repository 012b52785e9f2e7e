#include "common/wire/wire_encoding.h"

#include "absl/status/status.h"
#include "tests/catch.h"

namespace convoy {
namespace {

TEST_CASE("Every encoding goes to the wire and back as itself", "[encoding]") {
  for (TensorEncoding encoding : {TensorEncoding::kFp32, TensorEncoding::kBf16}) {
    for (UnspecifiedEncoding unspecified :
         {UnspecifiedEncoding::kRefused, UnspecifiedEncoding::kFp32}) {
      CHECK(FromWireEncoding(ToWireEncoding(encoding), unspecified).value() == encoding);
    }
  }
  CHECK(ToWireEncoding(TensorEncoding::kFp32) == v1::ENCODING_FP32);
  CHECK(ToWireEncoding(TensorEncoding::kBf16) == v1::ENCODING_BF16);
}

TEST_CASE(
    "An unspecified wire encoding means fp32 where a reader allows it, and is refused elsewhere",
    "[encoding]") {
  CHECK(FromWireEncoding(v1::ENCODING_UNSPECIFIED, UnspecifiedEncoding::kFp32).value() ==
        TensorEncoding::kFp32);
  const absl::StatusOr<TensorEncoding> refused =
      FromWireEncoding(v1::ENCODING_UNSPECIFIED, UnspecifiedEncoding::kRefused);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(refused.status().message() ==
        "unknown encoding 0; expected ENCODING_FP32 or ENCODING_BF16");
}

TEST_CASE("A wire encoding the protocol does not define is refused, naming the value",
          "[encoding]") {
  for (UnspecifiedEncoding unspecified :
       {UnspecifiedEncoding::kRefused, UnspecifiedEncoding::kFp32}) {
    const absl::StatusOr<TensorEncoding> decoded =
        FromWireEncoding(static_cast<v1::Encoding>(7), unspecified);
    REQUIRE_FALSE(decoded.ok());
    CHECK(decoded.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK(decoded.status().message() ==
          "unknown encoding 7; expected ENCODING_FP32 or ENCODING_BF16");
  }
}

}  // namespace
}  // namespace convoy
