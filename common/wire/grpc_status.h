// absl::Status <-> grpc::Status: the two share their codes (both are Google's canonical codes), so
// a conversion keeps the code and the message, both ways. The server answers with ToGrpcStatus, the
// client reads the answer with FromGrpcStatus.
#ifndef CONVOY_COMMON_WIRE_GRPC_STATUS_H_
#define CONVOY_COMMON_WIRE_GRPC_STATUS_H_

#include <grpcpp/client_context.h>
#include <grpcpp/support/status.h>

#include <optional>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace convoy {

// absl::Status -> grpc::Status with the same code and message.
grpc::Status ToGrpcStatus(const absl::Status& status);

// grpc::Status -> absl::Status with the same code and message.
absl::Status FromGrpcStatus(const grpc::Status& status);

// The trailing metadata a server sends with RESOURCE_EXHAUSTED to say how long to wait before
// trying again, in milliseconds: gRPC's own retry pushback, so a client with a gRPC retry policy
// honours it as well.
inline constexpr char kRetryPushbackKey[] = "grpc-retry-pushback-ms";

// A finished call's status, as FromGrpcStatus, carrying the retry pushback the server sent with it
// (RetryAfter reads it).
absl::Status FromGrpcCall(const grpc::Status& status, const grpc::ClientContext& context);

// `status` asking to be retried after `delay`, and the delay it asks for (none: it does not).
absl::Status WithRetryAfter(absl::Status status, absl::Duration delay);
std::optional<absl::Duration> RetryAfter(const absl::Status& status);

}  // namespace convoy

#endif  // CONVOY_COMMON_WIRE_GRPC_STATUS_H_
