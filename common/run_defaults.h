// The defaults of the settings of a run that are not (yet) rows of common/run_settings.h's table:
// the models, the learning rate, the averaged network's horizon and the epsilon schedule; and, for
// code that needs one default alone, the table's.
#ifndef CONVOY_COMMON_RUN_DEFAULTS_H_
#define CONVOY_COMMON_RUN_DEFAULTS_H_

#include <cstdint>

#include "common/run_settings.h"

namespace convoy::run_defaults {

inline constexpr char kServerModel[] = "cookbook";  // convoy_ps: the cookbook's network.
inline constexpr char kLocalModel[] =
    "compact";  // An agent alone, and convoy_train: fast on a CPU.
// The run settings a server hands to agents are declared in common/run_settings.h; these names read
// their defaults from that table for the code that needs one alone.
inline constexpr int kBatchSize = AgentRunSettings{}.batch_size;
inline constexpr int kBatchUpdateFrequency = AgentRunSettings{}.batch_update_frequency;
inline constexpr double kGamma = AgentRunSettings{}.gamma;
inline constexpr int kNStep = AgentRunSettings{}.n_step;
inline constexpr bool kDoubleDqn = AgentRunSettings{}.double_dqn;
inline constexpr double kLearnerMaxGradNorm = AgentRunSettings{}.max_grad_norm;
inline constexpr bool kPrioritized = AgentRunSettings{}.prioritized;
inline constexpr double kPriorityExponent = AgentRunSettings{}.priority_exponent;
// The averaged network's horizon, applied minibatches (param_server/weight_average.h): about three
// minutes of two agents on a 2-core machine. At the end of 30-minute runs it drove 20 and 19 of 20,
// where 4,000 (70 s) held no better than the last weights; in 10-minute runs it is the weaker
// candidate, and the final validation passes it over (docs/benchmarks.md, "The averaged network").
inline constexpr uint64_t kAverageHorizon = 10000;
inline constexpr double kLearningRate = 1e-3;
inline constexpr double kMinEpsilon = 0.1;
inline constexpr double kPerIterEpsilonReduction = 0.003;

}  // namespace convoy::run_defaults

#endif  // CONVOY_COMMON_RUN_DEFAULTS_H_
