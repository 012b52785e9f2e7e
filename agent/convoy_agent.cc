// convoy_agent: one DQN agent. Drives a car in the embedded simulator or AirSim, keeps its replay
// memory, trains locally and stays in step with a convoy_ps (or trains alone without --ps).

#include <atomic>
#include <cstdio>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "agent/agent.h"
#include "agent/agent_metrics.h"
#include "agent/client/client_security_settings.h"
#include "agent/client/push_log.h"
#include "agent/environment/scenario_settings.h"
#include "common/metrics/prometheus_endpoint.h"
#include "common/settings/agent_settings.h"
#include "common/settings/flag_ranges.h"
#include "common/settings/process_settings.h"
#include "common/settings/run_settings.h"
#include "common/support/init.h"
#include "common/support/settings_table.h"
#include "common/support/status_macros.h"
#include "common/wire/security.h"

namespace {
// The defaults every flag below shows: AgentOptions', written once there.
const convoy::agent::AgentOptions& Defaults() {
  static const convoy::agent::AgentOptions* const defaults = new convoy::agent::AgentOptions();
  return *defaults;
}
// Help of a run setting: with --ps the parameter server owns it (RunConfig).
std::string RunSetting(const std::string& what, const std::string& alone) {
  return absl::StrCat(what,
                      " A run setting: with --ps, the parameter server's (set it on convoy_ps; "
                      "given here it must agree); alone: ",
                      alone, ".");
}
// Help of a setting of the run settings' table; `server_flag` is convoy_ps's flag that sets it.
std::string RunSettingHelp(const std::string& what, const std::string& alone,
                           absl::string_view server_flag) {
  return RunSetting(absl::StrCat(what, " convoy_ps --", server_flag, "."), alone);
}
}  // namespace

// convoy_agent's own flags, a row each (common/support/settings_table.h); the settings other
// binaries take too are written through common/settings/process_settings.h.
#define CONVOY_AGENT_MAIN_SETTINGS(X)                                                              \
  CONVOY_PROCESS_SETTING(                                                                          \
      X, ps, "",                                                                                   \
      "Parameter server host:port, or for a sharded one (convoy_ps --num_shards) every shard's "   \
      "host:port,host:port,... in shard order, or @FILE listing them one per line in shard "       \
      "order; "                                                                                    \
      "empty trains alone with a local optimizer.")                                                \
  X(convoy::agent::SimTarget, sim, Defaults().environment.sim,                                     \
    "embedded, or airsim://host:port (AirSim, Colosseum, convoy_sim).")                            \
  CONVOY_PROCESS_SETTING(X, map_dir, "",                                                           \
                         "Map directory (road_lines.txt, reward_points.txt); default: bundled.")   \
  CONVOY_PROCESS_SETTING(X, seed, Defaults().seed,                                                 \
                         "Seed of the weights, exploration, replay sampling and episode starts.")  \
  CONVOY_PROCESS_SETTING(X, agent_id, Defaults().agent_id, "Agent id, unique per agent process.")  \
  CONVOY_PROCESS_SETTING(X, agent_index, Defaults().agent_index,                                   \
                         "Agent index, 0-based (selects the Ape-X epsilon).")                      \
  CONVOY_PROCESS_SETTING_UNLESS_GIVEN(                                                             \
      X, model,                                                                                    \
      RunSetting("Q-network (registry name: compact, cookbook, nature, ...).", Defaults().model))  \
  X(std::string, push, convoy::agent::PushModeName(Defaults().push),                               \
    "gradients, or deltas (for a PS run with --optimizer=delta).")                                 \
  X(std::string, push_encoding, "fp32", "fp32 or bf16.")                                           \
  X(uint64_t, max_steps, Defaults().max_steps,                                                     \
    "Stop after this many environment steps (0: no bound).")                                       \
  X(double, max_minutes, 0, "Stop after this many minutes (0: no bound).")                         \
  /* glog's header declares a global FLAGS_log_dir of its own (not a command-line flag here): this \
   */                                                                                              \
  /* file does not include glog, so --log_dir is convoy's. */                                      \
  X(std::string, log_dir, "", "Metrics (CSV, TensorBoard), weights.pt; empty: none.")              \
  X(std::string, replay_checkpoint_dir, "",                                                        \
    "Save the replay memory and the agent's state to DIR/<agent_id>.replay (compressed, "          \
    "atomic, with a SHA-256) every --replay_checkpoint_every and at the end of the run, a "        \
    "SIGTERM's too; one directory can hold every agent's. Empty: no replay checkpoints.")          \
  CONVOY_PROCESS_SETTING(                                                                          \
      X, resume, false,                                                                            \
      "Continue from the replay checkpoint in --replay_checkpoint_dir: transitions, priorities, "  \
      "counters (--max_steps counts the steps before), exploration and the learner. Without a "    \
      "checkpoint there, start with an empty replay memory (so a requeued job's one command "      \
      "line serves its first start too); a torn or foreign one is an error.")                      \
  CONVOY_PROCESS_SETTING(X, report_seconds, absl::ToDoubleSeconds(Defaults().report_every),        \
                         "Seconds between progress lines.")                                        \
  X(bool, machine_progress, false, "Also print PROGRESS key=value lines on stdout.")               \
  CONVOY_PROCESS_SETTING(                                                                          \
      X, push_log, "",                                                                             \
      "Append a line per minibatch trained and per answer of each server to a push "               \
      "(agent/client/push_log.h), for checking a run against convoy_ps --apply_log; empty: none.")
CONVOY_AGENT_MAIN_SETTINGS(CONVOY_SETTING_FLAG)
// The agent's own settings (common/settings/agent_settings.h): --device, --replay_memory_size, ...
CONVOY_AGENT_SETTINGS(CONVOY_AGENT_SETTING_FLAG)
// The run settings of the table (common/settings/run_settings.h): --batch_size, --n_step, --gamma,
// ...
CONVOY_RUN_SETTINGS(CONVOY_AGENT_RUN_SETTING_FLAG)

// The settings this binary shares with others, as flags (common/support/settings_table.h).
CONVOY_SETTINGS_FLAGS(CONVOY_CLIENT_SECURITY_SETTINGS, convoy::agent::ClientSecuritySettings,
                      ClientSecuritySettingsFromFlags)
CONVOY_SETTINGS_FLAGS(CONVOY_SCENARIO_SETTINGS, convoy::agent::ScenarioSettings,
                      ScenarioSettingsFromFlags)
CONVOY_SETTINGS_FLAGS(CONVOY_METRICS_ENDPOINT_SETTINGS, convoy::MetricsEndpointSettings,
                      MetricsEndpointSettingsFromFlags)

namespace convoy::agent {
namespace {

// A run setting given explicitly: its value, and its name in `pinned`.
template <typename T, typename Field>
void TakeSetting(const absl::Flag<std::optional<T>>& flag, Field* field,
                 std::set<std::string>* pinned) {
  if (std::optional<T> value = absl::GetFlag(flag); value.has_value()) {
    *field = static_cast<Field>(*value);
    pinned->insert(std::string(absl::GetFlagReflectionHandle(flag).Name()));
  }
}

// The settings of the run settings' table: each one given adds its flag to *pinned.
RunSettings RunSettingsFromFlags(std::set<std::string>* pinned) {
  RunSettings settings;
#define CONVOY_AGENT_RUN_SETTING_FROM_FLAG(type, name, def, min, max, ends, presence, help) \
  TakeSetting(FLAGS_##name, &settings.name, pinned);
  CONVOY_RUN_SETTINGS(CONVOY_AGENT_RUN_SETTING_FROM_FLAG)
#undef CONVOY_AGENT_RUN_SETTING_FROM_FLAG
  return settings;
}

CONVOY_AGENT_SETTINGS_FROM_FLAGS()

// Every numeric flag but --seed and --max_steps, which take any value. A run setting not given is
// checked at its default (the server checks its own).
bool NumericFlagsInRange() {
  std::set<std::string> pinned;
  std::vector<FlagRange> ranges =
      SettingRanges(RunSettingsFromFlags(&pinned), AgentSettingsFromFlags());
  const std::vector<FlagRange> others = {
      UintRange("agent_index", absl::GetFlag(FLAGS_agent_index), 0, 65535),
      RealRange("max_minutes", absl::GetFlag(FLAGS_max_minutes), 0, kNoRealMax),
      RealRange("report_seconds", absl::GetFlag(FLAGS_report_seconds), 0, kNoRealMax,
                Ends::kOpenMin)};
  ranges.insert(ranges.end(), others.begin(), others.end());
  return FlagsInRange("convoy_agent", ranges);
}

// `push`: --push, parsed by the caller.
AgentOptions OptionsFromFlags(PushMode push) {
  AgentOptions o;
  o.agent_id = absl::GetFlag(FLAGS_agent_id);
  o.agent_index = absl::GetFlag(FLAGS_agent_index);
  o.seed = absl::GetFlag(FLAGS_seed);
  o.ps_address = absl::GetFlag(FLAGS_ps);
  o.environment.sim = absl::GetFlag(FLAGS_sim);
  o.environment.map_dir = absl::GetFlag(FLAGS_map_dir);
  o.environment.world_seed = absl::GetFlag(FLAGS_seed);
  static_cast<AgentSettings&>(o) = AgentSettingsFromFlags();
  TakeSetting(FLAGS_model, &o.model, &o.pinned);
  static_cast<RunSettings&>(o) = RunSettingsFromFlags(&o.pinned);
  o.push = push;
  // Run() has refused an unknown value before the options are built.
  o.push_encoding =
      ParseTensorEncoding("push_encoding", absl::GetFlag(FLAGS_push_encoding)).value();
  o.max_steps = absl::GetFlag(FLAGS_max_steps);
  o.max_time = absl::Seconds(absl::GetFlag(FLAGS_max_minutes) * 60);
  o.log_dir = absl::GetFlag(FLAGS_log_dir);
  o.replay_checkpoint_dir = absl::GetFlag(FLAGS_replay_checkpoint_dir);
  o.resume = absl::GetFlag(FLAGS_resume);
  o.report_every = absl::Seconds(absl::GetFlag(FLAGS_report_seconds));
  o.machine_progress = absl::GetFlag(FLAGS_machine_progress);
  return o;
}

// The agent's options from the flags, with its scenario and (with --ps) its channel's security.
// Errors: INVALID_ARGUMENT (a usage error) naming the flag.
absl::StatusOr<AgentOptions> AgentOptionsFromFlags() {
  if (absl::StatusOr<TensorEncoding> encoding =
          ParseTensorEncoding("push_encoding", absl::GetFlag(FLAGS_push_encoding));
      !encoding.ok()) {
    return encoding.status();
  }
  const absl::StatusOr<PushMode> push = ParsePushMode(absl::GetFlag(FLAGS_push));
  if (!push.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("cannot start: ", push.status().ToString()));
  }
  AgentOptions options = OptionsFromFlags(*push);
  CONVOY_RETURN_IF_ERROR(UseScenarioSettings(ScenarioSettingsFromFlags(), &options.environment));
  if (!options.ps_address.empty()) {  // Alone, no channel: the security flags do not apply.
    absl::StatusOr<ClientSecurity> security = ClientSecurityFrom(ClientSecuritySettingsFromFlags());
    if (!security.ok()) return absl::InvalidArgumentError(security.status().ToString());
    options.ps_security = *std::move(security);
  }
  return options;
}

int Run() {
  if (!NumericFlagsInRange()) return kExitUsage;
  absl::StatusOr<AgentOptions> from_flags = AgentOptionsFromFlags();
  if (!from_flags.ok()) {
    std::fprintf(stderr, "convoy_agent: %s\n", std::string(from_flags.status().message()).c_str());
    return kExitUsage;
  }
  AgentOptions options = *std::move(from_flags);
  BlockTerminationSignals();
  static std::atomic<bool> stop{false};  // Outlives the detached waiter.
  std::thread([] {
    WaitForTerminationSignal();
    stop = true;
  }).detach();
  std::fprintf(stderr,
               "convoy_agent: scenario %s: %d parked, %d stalled and %d moving cars, route %g m, "
               "time limit %g s\n",
               options.environment.scenario.c_str(), options.environment.parked_cars,
               options.environment.stalled_cars, options.environment.traffic_cars,
               options.environment.env.route_length_m,
               options.environment.env.max_epoch_runtime_sec);
  std::shared_ptr<PushLog> push_log;
  if (const std::string path = absl::GetFlag(FLAGS_push_log); !path.empty()) {
    absl::StatusOr<std::unique_ptr<PushLog>> opened = PushLog::Open(path);
    if (!opened.ok()) {
      std::fprintf(stderr, "convoy_agent: --push_log: %s\n",
                   std::string(opened.status().message()).c_str());
      return kExitUsage;
    }
    push_log = *std::move(opened);
    push_log->Started(options.agent_id);
  }
  // The metrics port is bound before the agent joins, so that a port taken fails at once.
  auto metrics = std::make_shared<AgentMetrics>(options.agent_id);
  absl::StatusOr<std::unique_ptr<PrometheusEndpoint>> metrics_endpoint =
      PrometheusEndpoint::Serve(MetricsEndpointSettingsFromFlags(), {metrics});
  if (!metrics_endpoint.ok()) {
    std::fprintf(stderr, "convoy_agent: %s\n", metrics_endpoint.status().ToString().c_str());
    return metrics_endpoint.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  }
  std::vector<std::shared_ptr<SyncObserver>> observers = {metrics};
  if (push_log != nullptr) observers.push_back(push_log);
  absl::StatusOr<std::unique_ptr<Agent>> agent =
      Agent::Create(options, std::make_shared<SyncObservers>(std::move(observers)));
  if (!agent.ok()) {
    std::fprintf(stderr, "convoy_agent: cannot start: %s\n", agent.status().ToString().c_str());
    // Bad flags (also one that disagrees with the parameter server's run settings): 2, as for
    // usage.
    return agent.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  }
  metrics->SetStats([agent = agent->get()] { return agent->stats(); });
  absl::Status run = (*agent)->Run(stop);
  // The agent goes before the metrics port closes: scrapes from here on read its last stats.
  metrics->SetStats([last = (*agent)->stats()] { return last; });
  if (!run.ok()) {
    std::fprintf(stderr, "convoy_agent: failed: %s\n", run.ToString().c_str());
    return 1;
  }
  if (push_log != nullptr) {
    const AgentStats stats = (*agent)->stats();
    push_log->Ended(options.agent_id, stats.connected, stats.train_steps);
  }
  return 0;
}

}  // namespace
}  // namespace convoy::agent

int main(int argc, char** argv) {
  convoy::InitProcess(argc, argv,
                      "convoy_agent: a DQN driving agent.\n"
                      "Usage: convoy_agent [--ps=host:port] [--sim=embedded|airsim://host:port] "
                      "[--max_minutes=N] [--log_dir=DIR] [flags]");
  return convoy::agent::Run();
}
