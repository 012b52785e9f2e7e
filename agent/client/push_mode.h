// What an agent pushes to its parameter server, and how the server applies pushes: the two must
// fit, and Join checks that they do.
#ifndef CONVOY_AGENT_CLIENT_PUSH_MODE_H_
#define CONVOY_AGENT_CLIENT_PUSH_MODE_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace convoy::agent {

// What an agent pushes to the parameter server (--push).
enum class PushMode {
  kGradients,  // The mean gradient of its minibatches; the server runs the optimizer.
  kDeltas,     // The weight change of its local optimizer since the last sync (--optimizer=delta).
};

// "gradients" or "deltas". Errors: INVALID_ARGUMENT "--push must be gradients or deltas, got
// '<name>'".
absl::StatusOr<PushMode> ParsePushMode(absl::string_view name);
// The name ParsePushMode takes.
const char* PushModeName(PushMode mode);

// How the parameter server applies pushes (RunConfig.update_rule, a string on the wire).
enum class UpdateRule {
  kGradients,  // "gradients": the server runs the optimizer on pushed gradients.
  kDelta,      // "delta": the server adds the pushed tensor to its weights (--optimizer=delta).
};

// Errors: INVALID_ARGUMENT naming the unknown rule.
absl::StatusOr<UpdateRule> ParseUpdateRule(absl::string_view name);

// OK when an agent pushing `push` can train with a server applying `rule`; otherwise
// INVALID_ARGUMENT saying which flag to change.
absl::Status CheckPushModeFits(PushMode push, UpdateRule rule);

}  // namespace convoy::agent

#endif  // CONVOY_AGENT_CLIENT_PUSH_MODE_H_
