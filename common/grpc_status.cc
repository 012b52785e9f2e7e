#include "common/grpc_status.h"

#include <string>

namespace convoy {

// The numbering is the same on both sides; a mismatch would be a silent re-labelling of every error.
static_assert(static_cast<int>(absl::StatusCode::kUnauthenticated) == grpc::StatusCode::UNAUTHENTICATED &&
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

}  // namespace convoy
