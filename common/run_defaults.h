// The defaults of the settings a run's parameter server owns and hands to every agent on Join (RunConfig):
// written once here, read by ParameterServerOptions, AgentOptions (an agent training alone uses the same
// values) and the launchers' options, and through them by every flag that fills those structs.
#ifndef CONVOY_COMMON_RUN_DEFAULTS_H_
#define CONVOY_COMMON_RUN_DEFAULTS_H_

#include <cstdint>

namespace convoy::run_defaults {

inline constexpr char kServerModel[] = "cookbook";  // convoy_ps: the cookbook's network.
inline constexpr char kLocalModel[] = "compact";    // An agent alone, and convoy_train: fast on a CPU.
inline constexpr int kBatchSize = 32;
inline constexpr int kBatchUpdateFrequency = 4;  // Minibatches per push (the cookbook's name).
// 0.95: a 20-step (2 s) horizon, the time a corner is in view; with 0.99 the handed-over policies
// drove fewer starts to the time limit (docs/benchmarks.md, "Why turns fail").
inline constexpr double kGamma = 0.95;
// 3-step returns carry a crash's cost back three steps per update and hold the policy steady
// (docs/benchmarks.md, "The 30-minute run against the target").
inline constexpr int kNStep = 3;
inline constexpr uint64_t kTargetUpdateFrequency = 300;  // Minibatches between target-network copies.
// The averaged network's horizon, applied minibatches (param_server/weight_average.h): about three
// minutes of two agents on a 2-core machine. At the end of 30-minute runs it drove 20 and 19 of 20,
// where 4,000 (70 s) held no better than the last weights; in 10-minute runs it is the weaker
// candidate, and the final validation passes it over (docs/benchmarks.md, "The averaged network").
inline constexpr uint64_t kAverageHorizon = 10000;
inline constexpr bool kDoubleDqn = true;
inline constexpr double kLearnerMaxGradNorm = 10.0;  // The agent learner's clip of each update.
inline constexpr double kLearningRate = 1e-3;
// Prioritized replay: the rare transitions a corner or a crash makes are replayed more. The default
// runs with it handed over 17, 19 and 18 of 20 on seeds 1-3; without it, 13 (and 18), 13 and 14
// (docs/benchmarks.md, "The first-minute peak, and prioritized replay").
inline constexpr bool kPrioritized = true;
// Mirror half of each minibatch left to right: corners and intersections are learned both ways
// (docs/benchmarks.md, "Why turns fail").
inline constexpr bool kMirrorAugmentation = true;
inline constexpr double kMinEpsilon = 0.1;
inline constexpr double kPerIterEpsilonReduction = 0.003;

}  // namespace convoy::run_defaults

#endif  // CONVOY_COMMON_RUN_DEFAULTS_H_
