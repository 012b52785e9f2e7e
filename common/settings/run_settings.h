// The run settings a parameter server owns for a whole run and hands to every agent on Join
// (RunConfig), declared once, in CONVOY_RUN_SETTINGS below (EnvPool's env_spec.h is the model).
// Everything else about a setting is derived from its row:
//
//   - RunSettings, the struct ParameterServerOptions and AgentOptions embed;
//   - convoy_ps's flag (CONVOY_PS_RUN_SETTING_FLAG), convoy_agent's
//     (CONVOY_AGENT_RUN_SETTING_FLAG) and the launchers' (common/settings/launcher_run_settings.h): one name
//     and one type everywhere;
//   - the range checks (RunSettingRanges): one range per setting, for every binary;
//   - the RunConfig mapping both ways (FillRunConfig, AdoptRunSettings) and the conflict message of
//     a setting an agent pinned (RunSettingAdopter);
//   - the launchers' forwarding to convoy_ps (RunSettingArgs) and the hyperparameters a checkpoint
//     records (RunSettingValues).
// An agent's own settings, which no server hands over, are the second table, in
// common/settings/agent_settings.h.
//
// Adding a setting is one row here, its RunConfig field (an `optional` one in
// parameter_server.proto) and the code that uses it.
//
// No LibTorch, gRPC or protobuf here: the RunConfig functions are templates, instantiated where the
// message is known.
#ifndef CONVOY_COMMON_SETTINGS_RUN_SETTINGS_H_
#define CONVOY_COMMON_SETTINGS_RUN_SETTINGS_H_

#include <cstdint>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/settings/flag_ranges.h"

// One row per setting:
//   X(type, name, default, min, max, ends, presence, help)
// - name: the flag of convoy_ps, convoy_agent and the launchers, the RunConfig field and the
//   RunSettings member. An agent may pin any setting here by giving its flag; a pinned value that
//   disagrees with the server's is refused on Join.
// - type: the flags' and the member's; signed where a negative value must read as out of range,
//   not as a parse error.
// - min, max: the allowed range (booleans: any); ends: which ends belong to it (flag_ranges.h).
// - presence: how a RunConfig says it carries the setting: kOptional (an `optional` field,
//   has_...), kPositive (a field older servers may leave 0) or kAlways.
// - help: the flag's help; the binaries add who owns it.
#define CONVOY_RUN_SETTINGS(X)                                                                     \
  X(int, batch_size, 32, 1, 65536, kClosed, kPositive, "Minibatch size.")                          \
  X(int, batch_update_frequency, 4, 1, 65536, kClosed, kPositive,                                  \
    "Minibatches an agent accumulates between pushes to the parameter server (or local updates).") \
  /* 0.95: a 20-step (2 s) horizon, the time a corner is in view; with 0.99 the handed-over     */ \
  /* policies drove fewer starts to the time limit (docs/benchmarks.md, "Why turns fail").      */ \
  X(double, gamma, 0.95, 0, 1, kClosed, kAlways, "Discount.")                                      \
  /* 3-step returns carry a crash's cost back three steps per update and hold the policy steady */ \
  /* (docs/benchmarks.md, "The 30-minute run against the target").                              */ \
  X(int, n_step, 3, 1, 100, kClosed, kOptional, "n-step returns.")                                 \
  X(uint64_t, target_update_frequency, 300, 1, ::convoy::kNoUintMax, kClosed, kPositive,           \
    "Minibatches between target-network copies.")                                                  \
  /* Polyak's soft target, off by default (1: a plain copy): docs/benchmarks.md measures it.    */ \
  X(double, target_update_tau, 1.0, 0, 1, kOpenMin, kOptional,                                     \
    "The share of the way each target-network copy moves the target toward the online weights "    \
    "(target = tau * online + (1 - tau) * target, every target_update_frequency minibatches; 1: "  \
    "a plain copy).")                                                                              \
  X(bool, double_dqn, true, false, true, kClosed, kOptional, "Double DQN targets.")                \
  X(double, learner_max_grad_norm, 10.0, 0, ::convoy::kNoRealMax, kClosed, kOptional,              \
    "The agent learner's clip of each update's gradient norm (0: off).")                           \
  /* Prioritized replay: the rare transitions a corner or a crash makes are replayed more. */      \
  /* The default runs with it handed over 17, 19 and 18 of 20 on seeds 1-3; without it, */         \
  /* 13 (and 18), 13 and 14 (docs/benchmarks.md, "The first-minute peak, and */                    \
  /* prioritized replay"). */                                                                      \
  X(bool, prioritized, true, false, true, kClosed, kOptional, "Prioritized experience replay.")    \
  /* Prioritized replay's alpha: transitions are sampled in proportion to priority^alpha. */       \
  /* 0.6, the value of Schaul et al.'s proportional variant, is what the agents always used. */    \
  X(double, priority_exponent, 0.6, 0, 1, kClosed, kOptional,                                      \
    "Prioritized replay's priority exponent alpha: transitions are sampled in proportion to "      \
    "priority^alpha (0: uniformly).")                                                              \
  /* Corners and intersections are learned both ways (docs/benchmarks.md, "Why turns fail").    */ \
  X(bool, mirror_augmentation, true, false, true, kClosed, kOptional,                              \
    "Mirror every other sample of each minibatch left to right (image flipped, steering "          \
    "negated).")                                                                                   \
  /* DrQ's augmentation (Kostrikov et al. 2020), off by default: docs/benchmarks.md measures it.   \
   */                                                                                              \
  X(int, random_shift, 0, 0, 8, kClosed, kOptional,                                                \
    "Shift each sample of a minibatch, its observation and next observation each on its own, by "  \
    "up to this many pixels of the model's input in each direction, the edge repeated (DrQ; 0: "   \
    "off).")                                                                                       \
  X(double, learning_rate, 1e-3, 0, ::convoy::kNoRealMax, kOpenMin, kPositive,                     \
    "Learning rate: the parameter server's optimizer's, and an agent's local Adam (alone, "        \
    "deltas, "                                                                                     \
    "or while the server is away).")                                                               \
  /* The learning rate's fall (common/settings/exploration.h), by minibatches or over minutes of       */   \
  /* training, off by default: docs/benchmarks.md measures it.                                */   \
  X(uint64_t, learning_rate_decay_minibatches, 0, 0, ::convoy::kNoUintMax, kClosed, kOptional,     \
    "Applied minibatches over which the learning rate falls along half a cosine to "               \
    "final_learning_rate_scale times itself, where it stays (0: a constant rate).")                \
  X(double, learning_rate_decay_minutes, 0, 0, ::convoy::kNoRealMax, kClosed, kOptional,           \
    "The same fall over the server's training clock (the time between its applied steps, which "   \
    "a resume goes on from): it ends this many minutes of training after the server's start "      \
    "(0: off; not with learning_rate_decay_minibatches; a run's --minutes ends it with the run).") \
  X(double, final_learning_rate_scale, 0.1, 0, 1, kClosed, kOptional,                              \
    "The share of the learning rate left at the end of the fall (learning_rate_decay_minibatches " \
    "or learning_rate_decay_minutes).")                                                            \
  /* The epsilon schedule of the cookbook: global, from 1 down to the floor. */                    \
  X(double, min_epsilon, 0.1, 0, 1, kClosed, kAlways, "Epsilon floor.")                            \
  X(double, per_iter_epsilon_reduction, 0.003, 0, 1, kClosed, kAlways,                             \
    "Epsilon decrease per applied update (an agent alone: per update).")

namespace convoy {

// The settings as the server holds them (ParameterServerOptions embeds it) and as an agent holds
// them (AgentOptions embeds it): with a parameter server, the server's.
struct RunSettings {
#define CONVOY_RUN_SETTING_MEMBER(type, name, def, min, max, ends, presence, help) type name = def;
  CONVOY_RUN_SETTINGS(CONVOY_RUN_SETTING_MEMBER)
#undef CONVOY_RUN_SETTING_MEMBER
};

// A value as flags and messages print it: "true", "0.95", "3", "1s".
template <typename T>
std::string ShowSetting(const T& value) {
  if constexpr (std::is_same_v<T, bool>) {
    return value ? "true" : "false";
  } else if constexpr (std::is_same_v<T, absl::Duration>) {
    return absl::FormatDuration(value);
  } else {
    return absl::StrCat(value);
  }
}

// The range of one setting's value, as flag_ranges.h checks it; a boolean or a string is always in
// range.
template <typename T, typename Min, typename Max>
FlagRange SettingRange(absl::string_view name, T value, Min min, Max max, Ends ends) {
  if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, std::string>) {
    return FlagRange{std::string(name), ShowSetting(value), "", true};
  } else if constexpr (std::is_same_v<T, absl::Duration>) {
    return DurationRange(name, value, min, max, ends);
  } else if constexpr (std::is_floating_point_v<T>) {
    return RealRange(name, value, static_cast<double>(min), static_cast<double>(max), ends);
  } else if constexpr (std::is_signed_v<T>) {
    const int64_t upper = static_cast<uint64_t>(max) > static_cast<uint64_t>(kNoIntMax)
                              ? kNoIntMax
                              : static_cast<int64_t>(max);
    return IntRange(name, value, static_cast<int64_t>(min), upper);
  } else {
    return UintRange(name, value, static_cast<uint64_t>(min), static_cast<uint64_t>(max));
  }
}

// Every setting's range, by its flag's name.
std::vector<FlagRange> RunSettingRanges(const RunSettings& settings);

// "--name=value" for each (name, value).
std::vector<std::string> SettingArgs(
    const std::vector<std::pair<std::string, std::string>>& values);

// convoy_ps's flags for `settings`, "--n_step=3", one per setting: what a launcher passes on.
std::vector<std::string> RunSettingArgs(const RunSettings& settings);

// (name, value) of every setting, as a checkpoint's manifest records its hyperparameters.
std::vector<std::pair<std::string, std::string>> RunSettingValues(const RunSettings& settings);

// Adopts the server's value of one run setting, or refuses it when the agent pinned a different
// one.
class RunSettingAdopter {
 public:
  explicit RunSettingAdopter(const std::set<std::string>& pinned) : pinned_(pinned) {}

  // `flag` is the setting's flag, the same on the agent and on convoy_ps. After a refusal, further
  // calls change nothing.
  template <typename T, typename U>
  void Take(absl::string_view flag, T* mine, const U& server) {
    const T theirs = static_cast<T>(server);
    if (*mine == theirs || !status_.ok()) return;
    if (pinned_.count(std::string(flag)) > 0) {
      status_ = absl::InvalidArgumentError(absl::StrCat(
          "--", flag, "=", ShowSetting(*mine), " disagrees with the parameter server's ",
          ShowSetting(theirs), ": the server owns it for the whole run. Drop --", flag,
          " (the agent adopts the server's value), or start convoy_ps with --", flag, "=",
          ShowSetting(*mine)));
      return;
    }
    adopted_.push_back(
        absl::StrCat(flag, "=", ShowSetting(theirs), " (alone: ", ShowSetting(*mine), ")"));
    *mine = theirs;
  }

  const absl::Status& status() const { return status_; }
  // "n_step=2 (alone: 3)" for each value taken.
  const std::vector<std::string>& adopted() const { return adopted_; }

 private:
  const std::set<std::string>& pinned_;
  absl::Status status_;
  std::vector<std::string> adopted_;
};

// How a RunConfig says it carries a setting (the table's `presence`).
#define CONVOY_RUN_CONFIG_CARRIES_kOptional(config, name) (config).has_##name()
#define CONVOY_RUN_CONFIG_CARRIES_kPositive(config, name) ((config).name() > 0)
#define CONVOY_RUN_CONFIG_CARRIES_kAlways(config, name) true

// Writes every setting into a RunConfig (v1::RunConfig; a template so that common/ needs no
// protobuf).
template <typename Config>
void FillRunConfig(const RunSettings& settings, Config* config) {
#define CONVOY_RUN_SETTING_FILL(type, name, def, min, max, ends, presence, help) \
  config->set_##name(settings.name);
  CONVOY_RUN_SETTINGS(CONVOY_RUN_SETTING_FILL)
#undef CONVOY_RUN_SETTING_FILL
}

// Takes every setting `config` carries into *mine through `adopt` (a server that predates a setting
// sends none, and the agent keeps its own). Returns adopt's status.
template <typename Config>
absl::Status AdoptRunSettings(const Config& config, RunSettingAdopter* adopt, RunSettings* mine) {
#define CONVOY_RUN_SETTING_ADOPT(type, name, def, min, max, ends, presence, help) \
  if (CONVOY_RUN_CONFIG_CARRIES_##presence(config, name)) {                       \
    adopt->Take(#name, &mine->name, config.name());                               \
  }
  CONVOY_RUN_SETTINGS(CONVOY_RUN_SETTING_ADOPT)
#undef CONVOY_RUN_SETTING_ADOPT
  return adopt->status();
}

}  // namespace convoy

// convoy_ps's flag of a setting; expand CONVOY_RUN_SETTINGS(CONVOY_PS_RUN_SETTING_FLAG) at global
// scope.
#define CONVOY_PS_RUN_SETTING_FLAG(type, name, def, min, max, ends, presence, help) \
  ABSL_FLAG(type, name, def, help " Handed to agents, which adopt it on Join.");

// Reads a setting's flag into `settings` (CONVOY_RUN_SETTINGS_FROM_FLAGS).
#define CONVOY_RUN_SETTING_READ(type, name, def, min, max, ends, presence, help) \
  settings.name = absl::GetFlag(FLAGS_##name);

// Defines, where a binary with convoy_ps's flags expands it (convoy_ps, the launchers),
// `convoy::RunSettings RunSettingsFromFlags()`: the settings as its flags give them.
#define CONVOY_RUN_SETTINGS_FROM_FLAGS()         \
  ::convoy::RunSettings RunSettingsFromFlags() { \
    ::convoy::RunSettings settings;              \
    CONVOY_RUN_SETTINGS(CONVOY_RUN_SETTING_READ) \
    return settings;                             \
  }

// convoy_agent's flag of a setting: unset unless given (given, it pins the setting).
// `run_setting_help` is a function (help, default as text, convoy_ps's flag) -> the flag's help.
#define CONVOY_AGENT_RUN_SETTING_FLAG(type, name, def, min, max, ends, presence, help) \
  ABSL_FLAG(std::optional<type>, name, std::nullopt,                                   \
            RunSettingHelp(help, ::convoy::ShowSetting<type>(def), #name));

#endif  // CONVOY_COMMON_SETTINGS_RUN_SETTINGS_H_
