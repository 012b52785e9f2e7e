// The replay memory the replay and sampler tests reason about: 1-step returns, gamma 0.99, uniform
// sampling. A run's defaults differ (3-step returns, 0.95, prioritized: common/settings/run_settings.h);
// each test sets what else it needs.
#ifndef CONVOY_TESTS_AGENT_LEARNING_REPLAY_TEST_OPTIONS_H_
#define CONVOY_TESTS_AGENT_LEARNING_REPLAY_TEST_OPTIONS_H_

#include "agent/learning/replay_memory.h"

namespace convoy::testing {

inline agent::ReplayOptions OneStepUniform() {
  agent::ReplayOptions options;
  options.n_step = 1;
  options.gamma = 0.99;
  options.prioritized = false;
  return options;
}

}  // namespace convoy::testing

#endif  // CONVOY_TESTS_AGENT_LEARNING_REPLAY_TEST_OPTIONS_H_
