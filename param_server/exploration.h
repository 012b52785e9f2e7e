// The exploration schedule the parameter server owns and hands out in every push reply.
#ifndef CONVOY_PARAM_SERVER_EXPLORATION_H_
#define CONVOY_PARAM_SERVER_EXPLORATION_H_

#include <cstdint>

#include "absl/status/status.h"
#include "common/run_defaults.h"

namespace convoy {

struct ExplorationOptions {
  bool apex = false;  // false: the cookbook's global epsilon; true: Ape-X per-agent epsilons.
  double start_epsilon = 1.0;
  double min_epsilon = run_defaults::kMinEpsilon;
  double per_iter_epsilon_reduction = run_defaults::kPerIterEpsilonReduction;  // Per applied update.
  // Ape-X: agent i of N explores with base^(1 + alpha * i / (N - 1)).
  double apex_base_epsilon = 0.4;
  double apex_alpha = 7.0;
  uint32_t apex_num_agents = 8;
};

absl::Status ValidateExplorationOptions(const ExplorationOptions& options);

// Not thread-safe: lives inside the parameter server's state and is guarded there.
class ExplorationSchedule {
 public:
  explicit ExplorationSchedule(const ExplorationOptions& options)
      : options_(options), global_epsilon_(options.start_epsilon) {}

  // Called once per applied update.
  void OnUpdateApplied();

  // The epsilon agent `agent_index` should act with now.
  double EpsilonFor(uint32_t agent_index) const;

  double global_epsilon() const { return global_epsilon_; }
  void set_global_epsilon(double epsilon) { global_epsilon_ = epsilon; }  // Restored from a checkpoint.
  const ExplorationOptions& options() const { return options_; }

 private:
  ExplorationOptions options_;
  double global_epsilon_;
};

}  // namespace convoy

#endif  // CONVOY_PARAM_SERVER_EXPLORATION_H_
