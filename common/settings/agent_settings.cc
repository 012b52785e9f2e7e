#include "common/settings/agent_settings.h"

namespace convoy {

std::vector<FlagRange> AgentSettingRanges(const AgentSettings& settings) {
  std::vector<FlagRange> ranges;
#define CONVOY_AGENT_SETTING_RANGE(type, name, def, min, max, ends, help) \
  ranges.push_back(SettingRange(#name, settings.name, min, max, Ends::ends));
  CONVOY_AGENT_SETTINGS(CONVOY_AGENT_SETTING_RANGE)
#undef CONVOY_AGENT_SETTING_RANGE
  return ranges;
}

std::vector<std::pair<std::string, std::string>> AgentSettingValues(const AgentSettings& settings) {
  std::vector<std::pair<std::string, std::string>> values;
#define CONVOY_AGENT_SETTING_VALUE(type, name, def, min, max, ends, help) \
  values.emplace_back(#name, ShowSetting(settings.name));
  CONVOY_AGENT_SETTINGS(CONVOY_AGENT_SETTING_VALUE)
#undef CONVOY_AGENT_SETTING_VALUE
  return values;
}

std::vector<FlagRange> SettingRanges(const RunSettings& run, const AgentSettings& own) {
  std::vector<FlagRange> ranges = RunSettingRanges(run);
  for (FlagRange& range : AgentSettingRanges(own)) ranges.push_back(std::move(range));
  return ranges;
}

std::vector<std::string> AgentSettingArgs(const AgentSettings& settings) {
  return SettingArgs(AgentSettingValues(settings));
}

}  // namespace convoy
