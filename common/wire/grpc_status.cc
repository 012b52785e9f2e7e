#include "common/wire/grpc_status.h"

#include <string>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace convoy {

// The numbering is the same on both sides; a mismatch would be a silent re-labelling of every
// error.
static_assert(static_cast<int>(absl::StatusCode::kUnauthenticated) ==
                      grpc::StatusCode::UNAUTHENTICATED &&
                  static_cast<int>(absl::StatusCode::kResourceExhausted) ==
                      grpc::StatusCode::RESOURCE_EXHAUSTED &&
                  static_cast<int>(absl::StatusCode::kDataLoss) == grpc::StatusCode::DATA_LOSS,
              "absl and gRPC status codes share their numbers");

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

namespace {
// The payload WithRetryAfter attaches: the delay in milliseconds, as text.
constexpr absl::string_view kRetryAfterPayload = "convoy.dev/retry-after-ms";
}  // namespace

absl::Status WithRetryAfter(absl::Status status, absl::Duration delay) {
  status.SetPayload(kRetryAfterPayload, absl::Cord(absl::StrCat(absl::ToInt64Milliseconds(delay))));
  return status;
}

std::optional<absl::Duration> RetryAfter(const absl::Status& status) {
  const auto payload = status.GetPayload(kRetryAfterPayload);  // absl::optional on Debian 12.
  int64_t ms = 0;
  if (!payload.has_value() || !absl::SimpleAtoi(std::string(*payload), &ms) || ms < 0) {
    return std::nullopt;
  }
  return absl::Milliseconds(ms);
}

absl::Status FromGrpcCall(const grpc::Status& status, const grpc::ClientContext& context) {
  absl::Status converted = FromGrpcStatus(status);
  if (status.error_code() != grpc::StatusCode::RESOURCE_EXHAUSTED) return converted;
  const auto& trailers = context.GetServerTrailingMetadata();
  const auto it = trailers.find(kRetryPushbackKey);
  int64_t ms = 0;
  if (it == trailers.end() ||
      !absl::SimpleAtoi(absl::string_view(it->second.data(), it->second.size()), &ms) || ms < 0) {
    return converted;
  }
  return WithRetryAfter(std::move(converted), absl::Milliseconds(ms));
}

}  // namespace convoy
