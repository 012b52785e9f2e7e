#include "common/settings/exploration.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace convoy {

absl::StatusOr<ExplorationMode> ParseExplorationMode(absl::string_view name) {
  if (name == "global") return ExplorationMode::kGlobal;
  if (name == "apex") return ExplorationMode::kApex;
  return absl::InvalidArgumentError(absl::StrCat("must be global or apex, got '", name, "'"));
}

const char* ExplorationModeName(ExplorationMode mode) {
  switch (mode) {
    case ExplorationMode::kGlobal:
      return "global";
    case ExplorationMode::kApex:
      return "apex";
  }
  return "unknown";  // Unreachable: the switch names every mode.
}

absl::Status ValidateExplorationOptions(const ExplorationOptions& o) {
  auto in_unit = [](double v) { return v >= 0 && v <= 1; };
  if (!in_unit(o.start_epsilon) || !in_unit(o.min_epsilon) || o.min_epsilon > o.start_epsilon) {
    return absl::InvalidArgumentError(absl::StrCat("need 0 <= min_epsilon (", o.min_epsilon,
                                                   ") <= start epsilon (", o.start_epsilon,
                                                   ") <= 1"));
  }
  if (o.per_iter_epsilon_reduction < 0) {
    return absl::InvalidArgumentError(absl::StrCat("per_iter_epsilon_reduction must be >= 0, got ",
                                                   o.per_iter_epsilon_reduction));
  }
  if (o.mode == ExplorationMode::kApex &&
      (!in_unit(o.apex_base_epsilon) || o.apex_alpha < 0 || o.apex_num_agents < 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Ape-X exploration needs base epsilon in [0, 1], alpha >= 0 and at least one agent; got ",
        o.apex_base_epsilon, ", ", o.apex_alpha, ", ", o.apex_num_agents));
  }
  return absl::OkStatus();
}

void ExplorationSchedule::OnUpdateApplied() {
  global_epsilon_ =
      std::max(options_.min_epsilon, global_epsilon_ - options_.per_iter_epsilon_reduction);
}

double ExplorationSchedule::EpsilonFor(uint32_t agent_index) const {
  switch (options_.mode) {
    case ExplorationMode::kGlobal:
      return global_epsilon_;
    case ExplorationMode::kApex:
      break;
  }
  const uint32_t n = options_.apex_num_agents;
  const double position =
      n <= 1 ? 0.0 : static_cast<double>(std::min(agent_index, n - 1)) / (n - 1);
  return std::pow(options_.apex_base_epsilon, 1.0 + options_.apex_alpha * position);
}

}  // namespace convoy
