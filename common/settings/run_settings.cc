#include "common/settings/run_settings.h"

namespace convoy {

std::vector<FlagRange> RunSettingRanges(const RunSettings& settings) {
  std::vector<FlagRange> ranges;
#define CONVOY_RUN_SETTING_RANGE(type, name, def, min, max, ends, presence, help) \
  ranges.push_back(SettingRange(#name, settings.name, min, max, Ends::ends));
  CONVOY_RUN_SETTINGS(CONVOY_RUN_SETTING_RANGE)
#undef CONVOY_RUN_SETTING_RANGE
  return ranges;
}

std::vector<std::string> SettingArgs(
    const std::vector<std::pair<std::string, std::string>>& values) {
  std::vector<std::string> args;
  for (const auto& [name, value] : values) args.push_back(absl::StrCat("--", name, "=", value));
  return args;
}

std::vector<std::string> RunSettingArgs(const RunSettings& settings) {
  return SettingArgs(RunSettingValues(settings));
}

std::vector<std::pair<std::string, std::string>> RunSettingValues(const RunSettings& settings) {
  std::vector<std::pair<std::string, std::string>> values;
#define CONVOY_RUN_SETTING_VALUE(type, name, def, min, max, ends, presence, help) \
  values.emplace_back(#name, ShowSetting(settings.name));
  CONVOY_RUN_SETTINGS(CONVOY_RUN_SETTING_VALUE)
#undef CONVOY_RUN_SETTING_VALUE
  return values;
}

}  // namespace convoy
