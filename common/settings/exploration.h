// The exploration schedule (epsilon), the target-network refresh rule and the learning rate's
// schedule: the parameter server runs them for a run with agents, an agent training alone runs the
// same ones locally. None depends on gRPC or LibTorch.
#ifndef CONVOY_COMMON_SETTINGS_EXPLORATION_H_
#define CONVOY_COMMON_SETTINGS_EXPLORATION_H_

#include <cmath>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/settings/run_defaults.h"

namespace convoy {

// How agents pick their exploration rate (the --exploration flag, RunConfig.exploration).
enum class ExplorationMode {
  kGlobal,  // The cookbook's: one epsilon for all, decayed per applied update.
  kApex,    // Ape-X: a fixed epsilon per agent from its index.
};

// "global" or "apex". Errors: INVALID_ARGUMENT "must be global or apex, got '<name>'" for any
// other.
absl::StatusOr<ExplorationMode> ParseExplorationMode(absl::string_view name);
// The name ParseExplorationMode takes.
const char* ExplorationModeName(ExplorationMode mode);

// The schedule's own settings (convoy_ps's flags). Its floor and decay are run settings
// (common/settings/run_settings.h), handed to agents too: ExplorationOptions adds them.
struct ExplorationSettings {
  ExplorationMode mode = ExplorationMode::kGlobal;
  double start_epsilon = 1.0;
  // Ape-X: agent i of N explores with base^(1 + alpha * i / (N - 1)).
  double apex_base_epsilon = 0.4;
  double apex_alpha = 7.0;
  uint32_t apex_num_agents = 8;
};

struct ExplorationOptions : ExplorationSettings {
  double min_epsilon = run_defaults::kMinEpsilon;
  double per_iter_epsilon_reduction =
      run_defaults::kPerIterEpsilonReduction;  // Per applied update.
};

absl::Status ValidateExplorationOptions(const ExplorationOptions& options);

// Global mode: epsilon starts at start_epsilon and loses per_iter_epsilon_reduction per applied
// update, down to min_epsilon. Ape-X mode: EpsilonFor(i) is fixed; updates change nothing an agent
// sees. Not thread-safe: the parameter server guards it with its state; an agent owns its own.
class ExplorationSchedule {
 public:
  explicit ExplorationSchedule(const ExplorationOptions& options)
      : options_(options), global_epsilon_(options.start_epsilon) {}

  // Called once per applied update.
  void OnUpdateApplied();

  // The epsilon agent `agent_index` should act with now.
  double EpsilonFor(uint32_t agent_index) const;

  double global_epsilon() const { return global_epsilon_; }
  void set_global_epsilon(double epsilon) {
    global_epsilon_ = epsilon;
  }  // Restored from a checkpoint.
  const ExplorationOptions& options() const { return options_; }

 private:
  ExplorationOptions options_;
  double global_epsilon_;
};

// The target-network refresh rule: the target is a copy of the online network, taken again once
// `target_update_frequency` minibatches have been applied since the previous copy. `minibatches`
// and `minibatches_at_target` count applied minibatches since the start of the run.
inline bool TargetRefreshDue(uint64_t minibatches, uint64_t minibatches_at_target,
                             uint64_t target_update_frequency) {
  return minibatches - minibatches_at_target >= target_update_frequency;
}

// Half a cosine from 1 down to `final_scale` at `progress` (0 at its start, 1 at its end), and
// `final_scale` from then on (SGDR's shape without its restarts, Loshchilov and Hutter 2017).
inline double CosineScale(double progress, double final_scale) {
  if (progress >= 1.0) return final_scale;
  if (progress <= 0.0) return 1.0;
  constexpr double kPi = 3.14159265358979323846;
  return final_scale + (1.0 - final_scale) * 0.5 * (1.0 + std::cos(kPi * progress));
}

// The learning rate's schedule, as a factor of the run's learning_rate for the optimizer step taken
// after `minibatches` applied minibatches: 1 while `decay_minibatches` is 0 (a constant rate);
// else CosineScale over the first `decay_minibatches`.
// The applied minibatches are checkpointed with the run, so a resumed run continues the schedule.
inline double LearningRateScale(uint64_t minibatches, uint64_t decay_minibatches,
                                double final_scale) {
  if (decay_minibatches == 0) return 1.0;
  return CosineScale(static_cast<double>(minibatches) / static_cast<double>(decay_minibatches),
                     final_scale);
}

// The same fall over a run's wall-clock training (learning_rate_decay_minutes): `trained` is the
// training clock now, `horizon` where the fall ends on it (the clock at a start's beginning plus
// the setting's minutes, so that the rate reaches `final_scale` as a wall-clock-bounded start
// ends); 1 while `horizon` is zero.
inline double LearningRateScaleOverTime(absl::Duration trained, absl::Duration horizon,
                                        double final_scale) {
  if (horizon <= absl::ZeroDuration()) return 1.0;
  return CosineScale(absl::FDivDuration(trained, horizon), final_scale);
}

}  // namespace convoy

#endif  // CONVOY_COMMON_SETTINGS_EXPLORATION_H_
