// The defaults of the settings of a run that are not rows of common/settings/run_settings.h's table: the
// models (the server's and an agent's differ) and the averaged network's horizon (the server's
// alone); the run settings of a run on one machine; and, for code that needs one default alone,
// the table's.
#ifndef CONVOY_COMMON_SETTINGS_RUN_DEFAULTS_H_
#define CONVOY_COMMON_SETTINGS_RUN_DEFAULTS_H_

#include <cstdint>

#include "common/settings/run_settings.h"

namespace convoy::run_defaults {

inline constexpr char kServerModel[] = "cookbook";  // convoy_ps: the cookbook's network.
// An agent alone, convoy_train and convoy_eval: fast on a CPU. The dueling head held the online
// weights steadier than `compact`'s plain one (docs/benchmarks.md, "Toward the expert"), and the
// last two frames tell a stalled car from one driving ahead (it grows faster between them): 0.857
// and 0.848 at 10 minutes against one frame's 0.786 and 0.734 ("Toward the expert, round three").
inline constexpr char kLocalModel[] = "compact_stack2_dueling";
// The run settings of a run on one machine, which convoy_train and convoy_bench_learn start
// convoy_ps with (their flags and LocalClusterOptions default to them): the table's, but for three
// measured together with `compact_dueling` at 10 minutes, 2 agents on 2 cores (docs/benchmarks.md,
// "Toward the expert, round two": 0.786 and 0.734 on the evaluation seeds against the table's
// 0.52-0.64; with kLocalModel's two frames 0.857 and 0.848): a server step on every minibatch's
// gradient (four times the table's steps for the same samples), a target network taken every 1,200
// minibatches, and an epsilon floor of 0.01. The table keeps convoy_ps's own for clusters, where a
// push and a pull per minibatch of every agent would make the server the bottleneck
// (docs/deploy.md, "Sizing"). The learning rate stays constant: its fall over a 10-minute run
// (learning_rate_decay_minutes=10) scored 0.806 and 0.805 against a constant rate's 0.857 and
// 0.848, within the intervals (docs/benchmarks.md, "Toward the expert, round five").
inline constexpr RunSettings kLocalRunSettings = [] {
  RunSettings local;
  local.batch_update_frequency = 1;
  local.target_update_frequency = 1200;
  local.min_epsilon = 0.01;
  return local;
}();
// The run settings a server hands to agents are declared in common/settings/run_settings.h; these names read
// their defaults from that table for the code that needs one alone.
inline constexpr int kBatchSize = RunSettings{}.batch_size;
inline constexpr int kBatchUpdateFrequency = RunSettings{}.batch_update_frequency;
inline constexpr double kGamma = RunSettings{}.gamma;
inline constexpr int kNStep = RunSettings{}.n_step;
inline constexpr bool kDoubleDqn = RunSettings{}.double_dqn;
inline constexpr double kLearnerMaxGradNorm = RunSettings{}.learner_max_grad_norm;
inline constexpr bool kPrioritized = RunSettings{}.prioritized;
inline constexpr double kPriorityExponent = RunSettings{}.priority_exponent;
inline constexpr double kLearningRate = RunSettings{}.learning_rate;
inline constexpr double kMinEpsilon = RunSettings{}.min_epsilon;
inline constexpr double kPerIterEpsilonReduction = RunSettings{}.per_iter_epsilon_reduction;
// The averaged network's horizon, applied minibatches (param_server/core/weight_average.h): about three
// minutes of two agents on a 2-core machine. At the end of 30-minute runs it drove 20 and 19 of 20,
// where 4,000 (70 s) held no better than the last weights; in 10-minute runs it is the weaker
// candidate, and the final validation passes it over (docs/benchmarks.md, "The averaged network").
inline constexpr uint64_t kAverageHorizon = 10000;
// convoy_train's averaged network, whose run has a known length: 300 applied minibatches per minute of
// training, about a ninth of the minibatches two agents apply on a 2-core machine (about 2,700 a minute).
// At 10 minutes (3,000) it was the best candidate in three runs of four and 0.02 behind the best in the
// fourth, where kAverageHorizon's was the best in one of four and 0.30 behind in another (docs/benchmarks.md,
// "Toward the expert, round seven"); at 30 minutes (9,000) it is near the 10,000 measured there.
inline constexpr uint64_t kLocalAverageHorizonPerMinute = 300;

}  // namespace convoy::run_defaults

#endif  // CONVOY_COMMON_SETTINGS_RUN_DEFAULTS_H_
