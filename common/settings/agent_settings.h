// The settings each agent keeps for itself — its replay memory, its pace, its hardware — declared
// once, in CONVOY_AGENT_SETTINGS below. They are the second table of an agent's options:
// AgentOptions is the run settings' table (common/settings/run_settings.h, which a parameter server hands
// over on Join) concatenated with this one, as EnvPool concatenates its common config with each
// environment's. Everything else about a setting is derived from its row:
//
//   - AgentSettings, the struct AgentOptions and LocalClusterOptions embed;
//   - the flag of convoy_agent and of the launchers (convoy_train, convoy_bench_learn), with one
//     name and one type everywhere (CONVOY_AGENT_SETTING_FLAG);
//   - the range checks (AgentSettingRanges), for every binary;
//   - the launchers' forwarding to each agent (AgentSettingArgs): rows, not fields.
//
// Adding a setting is one row here and the code that uses it.
#ifndef CONVOY_COMMON_SETTINGS_AGENT_SETTINGS_H_
#define CONVOY_COMMON_SETTINGS_AGENT_SETTINGS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "common/settings/flag_ranges.h"
#include "common/settings/run_settings.h"

// One row per setting:
//   X(type, name, default, min, max, ends, help)
// - name: the flag of convoy_agent and of every launcher, and the member of AgentSettings.
// - min, max: the allowed range (booleans and strings: any; durations: absl::Duration bounds);
//   ends: which ends belong to it.
#define CONVOY_AGENT_SETTINGS(X)                                                                  \
  X(std::string, device, "auto", 0, 0, kClosed,                                                   \
    "auto, cpu, cuda or cuda:N (auto: LOCAL_RANK's GPU, else CPU).")                              \
  X(bool, amp, false, false, true, kClosed,                                                       \
    "Automatic mixed precision with loss scaling (CUDA only).")                                   \
  X(int, torch_threads, 0, 0, 1024, kClosed,                                                      \
    "LibTorch intra-op threads (0: LibTorch's default, all cores; a launcher gives each of its "  \
    "agents cores / agents). Agents sharing a machine do best with cores / agents.")              \
  /* 50,000: what every measured convoy_train run used (docs/benchmarks.md); convoy_agent's */    \
  /* own default was 100,000 until the two launchers shared this row.                       */    \
  X(uint64_t, replay_memory_size, 50000, 1, ::convoy::kNoUintMax, kClosed,                        \
    "Replay memory capacity, transitions.")                                                       \
  X(uint64_t, min_replay_size, 1000, 1, ::convoy::kNoUintMax, kClosed,                            \
    "Transitions collected before learning starts.")                                              \
  X(bool, fill_with_random_actions, true, false, true, kClosed,                                   \
    "Act at random until min_replay_size (the cookbook's start).")                                \
  /* Two keep the learner from waiting on the sampler on a CPU; a GPU's copies may want more. */  \
  X(int, prefetch_batches, 2, 1, 64, kClosed,                                                     \
    "Minibatches the background sampler keeps ready for the learner (on CUDA, already copied).")  \
  X(double, replay_ratio, 8.0, 0, ::convoy::kNoRealMax, kOpenMin,                                 \
    "Sampled transitions per environment step.")                                                  \
  /* Past it the agent is out of step: it learns locally, as in an outage, and pushes what it  */ \
  /* learned once the server answers. So a silent link costs acting at most this, once.        */ \
  X(absl::Duration, sync_wait, absl::Seconds(1), absl::ZeroDuration(), absl::InfiniteDuration(),  \
    kClosed,                                                                                      \
    "How long training waits for the parameter server's answer to a push before the agent "       \
    "learns locally until the answer comes (acting never waits longer), e.g. 1s, 500ms.")         \
  X(absl::Duration, final_sync_for, absl::Seconds(10), absl::ZeroDuration(),                      \
    absl::InfiniteDuration(), kClosed,                                                            \
    "At the end of a run, how long the agent tries to reach a parameter server that does not "    \
    "answer, so that its last minibatches reach it. It stops trying at once when the server is "  \
    "gone: nothing listens at its address for a second, or the launcher that started the agent "  \
    "died.")                                                                                      \
  /* A full 50,000-transition save takes some 2 s of one core and 84 MB (docs/benchmarks.md);  */ \
  /* a preemption's SIGTERM saves anyway, so the period bounds only what a SIGKILL loses.      */ \
  X(absl::Duration, replay_checkpoint_every, absl::Minutes(10), absl::ZeroDuration(),             \
    absl::InfiniteDuration(), kClosed,                                                            \
    "With --replay_checkpoint_dir: how often the agent saves its replay memory and state there "  \
    "(0: only at the end of its run, a SIGTERM's included), e.g. 10m.")

namespace convoy {

// The settings as an agent holds them (AgentOptions embeds it) and a launcher passes them on.
struct AgentSettings {
#define CONVOY_AGENT_SETTING_MEMBER(type, name, def, min, max, ends, help) type name = def;
  CONVOY_AGENT_SETTINGS(CONVOY_AGENT_SETTING_MEMBER)
#undef CONVOY_AGENT_SETTING_MEMBER
};

// Every setting's range, by its flag's name.
std::vector<FlagRange> AgentSettingRanges(const AgentSettings& settings);

// (name, value) of every setting, as flags print them.
std::vector<std::pair<std::string, std::string>> AgentSettingValues(const AgentSettings& settings);

// convoy_agent's flags for `settings`, "--replay_ratio=8", one per setting: what a launcher passes
// to each agent.
std::vector<std::string> AgentSettingArgs(const AgentSettings& settings);

// The ranges of both tables' settings, the run settings' first: what convoy_agent and the launchers
// check before anything starts.
std::vector<FlagRange> SettingRanges(const RunSettings& run, const AgentSettings& own);

}  // namespace convoy

// The flag of a setting, the same in convoy_agent and every launcher; expand
// CONVOY_AGENT_SETTINGS(CONVOY_AGENT_SETTING_FLAG) at global scope.
#define CONVOY_AGENT_SETTING_FLAG(type, name, def, min, max, ends, help) \
  ABSL_FLAG(type, name, def, help " Each agent's own.");

// Reads a setting's flag into `settings` (CONVOY_AGENT_SETTINGS_FROM_FLAGS).
#define CONVOY_AGENT_SETTING_READ(type, name, def, min, max, ends, help) \
  settings.name = absl::GetFlag(FLAGS_##name);

// Defines, where a binary with those flags expands it (convoy_agent, the launchers),
// `convoy::AgentSettings AgentSettingsFromFlags()`: the settings as its flags give them.
#define CONVOY_AGENT_SETTINGS_FROM_FLAGS()           \
  ::convoy::AgentSettings AgentSettingsFromFlags() { \
    ::convoy::AgentSettings settings;                \
    CONVOY_AGENT_SETTINGS(CONVOY_AGENT_SETTING_READ) \
    return settings;                                 \
  }

#endif  // CONVOY_COMMON_SETTINGS_AGENT_SETTINGS_H_
