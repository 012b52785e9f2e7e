// convoy_ps's settings table (param_server/service/server_settings.h): its defaults are the
// options' own, and its ranges refuse what convoy_ps refused.
#include "param_server/service/server_settings.h"

#include <string>
#include <vector>

#include "tests/catch.h"

namespace convoy::ps {
namespace {

// The range of `name` in `ranges`; fails the test when there is none.
FlagRange RangeOf(const std::vector<FlagRange>& ranges, const std::string& name) {
  for (const FlagRange& range : ranges) {
    if (range.name == name) return range;
  }
  FAIL("no range for --" << name);
  return {};
}

TEST_CASE("The server's settings table defaults every option as the options do") {
  const ServerSettings settings;
  const ParameterServerOptions defaults;
  const ParameterServerOptions o =
      ServerOptionsFrom(settings, RunSettings{}, ExplorationMode::kGlobal);
  CHECK(o.model == defaults.model);
  CHECK(o.num_actions == defaults.num_actions);
  CHECK(o.seed == defaults.seed);
  CHECK(o.resume == defaults.resume);
  CHECK(o.keep_checkpoints == defaults.keep_checkpoints);
  CHECK(o.checkpoint_every == defaults.checkpoint_every);
  CHECK(o.optimizer.kind == defaults.optimizer.kind);
  CHECK(o.optimizer.beta2 == defaults.optimizer.beta2);
  CHECK(o.max_staleness == defaults.max_staleness);
  CHECK(o.average_horizon == defaults.average_horizon);
  CHECK(o.average_every == defaults.average_every);
  CHECK(o.exploration.apex_num_agents == defaults.exploration.apex_num_agents);
  CHECK(o.max_pushes_per_step == defaults.max_pushes_per_step);
  CHECK(o.num_shards == defaults.num_shards);
  CHECK(o.shard_index == defaults.shard_index);
  const ServiceOptions service = ServiceOptionsFrom(settings);
  const ServiceOptions service_defaults;
  CHECK(service.stream_idle_timeout == service_defaults.stream_idle_timeout);
  CHECK(service.receive_window_bytes == service_defaults.receive_window_bytes);
  CHECK(service.busy_retry_after == service_defaults.busy_retry_after);
  CHECK(service.max_waiting_pushes == service_defaults.max_waiting_pushes);
}

TEST_CASE("The server's settings table's ranges refuse what convoy_ps refuses, by flag") {
  ServerSettings settings;
  CHECK(CheckFlagRanges(ServerSettingRanges(settings)).ok());
  settings.num_shards = 2;
  settings.shard_index = 2;
  settings.beta1 = 1;
  settings.port = 70000;
  const std::vector<FlagRange> ranges = ServerSettingRanges(settings);
  CHECK_FALSE(RangeOf(ranges, "shard_index").in_range);
  CHECK(RangeOf(ranges, "shard_index").range == "[0, 1]");
  CHECK_FALSE(RangeOf(ranges, "beta1").in_range);
  CHECK(RangeOf(ranges, "beta1").range == "[0, 1)");
  CHECK_FALSE(RangeOf(ranges, "port").in_range);
  CHECK(RangeOf(ranges, "optimizer").in_range);
  CHECK(RangeOf(ranges, "seed").in_range);
}

}  // namespace
}  // namespace convoy::ps
