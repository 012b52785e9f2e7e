// absl::Status <-> grpc::Status: the two share their codes (both are Google's canonical codes), so a
// conversion keeps the code and the message, both ways. The server answers with ToGrpcStatus, the client
// reads the answer with FromGrpcStatus.
#ifndef CONVOY_COMMON_GRPC_STATUS_H_
#define CONVOY_COMMON_GRPC_STATUS_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace convoy {

// absl::Status -> grpc::Status with the same code and message.
grpc::Status ToGrpcStatus(const absl::Status& status);

// grpc::Status -> absl::Status with the same code and message.
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace convoy

#endif  // CONVOY_COMMON_GRPC_STATUS_H_
