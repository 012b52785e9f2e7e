#include "agent/environment/scenario_settings.h"

#include "common/support/status_macros.h"

namespace convoy::agent {

absl::Status UseScenarioSettings(const ScenarioSettings& settings, EnvironmentSpec* spec) {
  const std::optional<double>& limit = settings.max_epoch_runtime_sec;
  if (limit.has_value() && !(*limit > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_epoch_runtime_sec must be in (0, inf), got ", *limit));
  }
  CONVOY_RETURN_IF_ERROR(UseScenario(settings.scenario, spec));
  if (limit.has_value()) spec->env.max_epoch_runtime_sec = *limit;
  return absl::OkStatus();
}

}  // namespace convoy::agent
