#include "agent/client/push_mode.h"

#include "absl/strings/str_cat.h"

namespace convoy::agent {

absl::StatusOr<PushMode> ParsePushMode(absl::string_view name) {
  if (name == "gradients") return PushMode::kGradients;
  if (name == "deltas") return PushMode::kDeltas;
  return absl::InvalidArgumentError(
      absl::StrCat("--push must be gradients or deltas, got '", name, "'"));
}

const char* PushModeName(PushMode mode) {
  switch (mode) {
    case PushMode::kGradients:
      return "gradients";
    case PushMode::kDeltas:
      return "deltas";
  }
  return "unknown";  // Unreachable: the switch names every mode.
}

absl::StatusOr<UpdateRule> ParseUpdateRule(absl::string_view name) {
  if (name == "gradients") return UpdateRule::kGradients;
  if (name == "delta") return UpdateRule::kDelta;
  return absl::InvalidArgumentError(absl::StrCat("the parameter server's update rule is '", name,
                                                 "', neither gradients nor delta"));
}

absl::Status CheckPushModeFits(PushMode push, UpdateRule rule) {
  switch (rule) {
    case UpdateRule::kDelta:
      switch (push) {
        case PushMode::kDeltas:
          return absl::OkStatus();
        case PushMode::kGradients:
          return absl::InvalidArgumentError(
              "the parameter server applies deltas (--optimizer=delta): start agents with "
              "--push=deltas");
      }
      break;
    case UpdateRule::kGradients:
      switch (push) {
        case PushMode::kGradients:
          return absl::OkStatus();
        case PushMode::kDeltas:
          return absl::InvalidArgumentError(
              "--push=deltas needs a parameter server started with --optimizer=delta");
      }
      break;
  }
  return absl::InternalError("unknown push mode or update rule");  // Unreachable.
}

}  // namespace convoy::agent
