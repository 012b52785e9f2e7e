#include "common/support/status_macros.h"

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tests/catch.h"

namespace convoy {
namespace {

absl::StatusOr<int> Half(int n) {
  if (n % 2 != 0) return absl::InvalidArgumentError("odd");
  return n / 2;
}

absl::Status CheckEven(int n) { return Half(n).status(); }

absl::Status Twice(int n, int* calls) {
  ++*calls;
  CONVOY_RETURN_IF_ERROR(CheckEven(n));
  ++*calls;
  return absl::OkStatus();
}

absl::StatusOr<int> Quarter(int n) {
  CONVOY_ASSIGN_OR_RETURN(int half, Half(n));
  CONVOY_ASSIGN_OR_RETURN(half, Half(half));
  return half;
}

absl::StatusOr<std::unique_ptr<int>> Boxed(int n) { return std::make_unique<int>(n); }

absl::StatusOr<int> Unboxed(int n) {
  CONVOY_ASSIGN_OR_RETURN(std::unique_ptr<int> box, Boxed(n));  // A move-only value.
  return *box;
}

TEST_CASE("RETURN_IF_ERROR returns the failing status and runs nothing after it") {
  int calls = 0;
  absl::Status status = Twice(3, &calls);
  CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(status.message()) == "odd");
  CHECK(calls == 1);
  calls = 0;
  CHECK(Twice(4, &calls).ok());
  CHECK(calls == 2);
}

TEST_CASE("ASSIGN_OR_RETURN declares or assigns the value, and returns the error unchanged") {
  REQUIRE(Quarter(8).ok());
  CHECK(*Quarter(8) == 2);
  CHECK(Quarter(6).status().code() == absl::StatusCode::kInvalidArgument);  // 6 -> 3, odd.
  CHECK(Quarter(5).status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(*Unboxed(7) == 7);
}

}  // namespace
}  // namespace convoy
