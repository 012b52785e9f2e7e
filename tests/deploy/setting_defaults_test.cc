// No struct that carries a run setting may default it differently from the table that declares it
// (common/run_settings.h, common/run_defaults.h): a struct made without the table, a test's or a
// tool's, must behave as a run does.
#include "agent/agent.h"
#include "agent/learner.h"
#include "agent/parameter_server_sync.h"
#include "agent/replay_memory.h"
#include "common/exploration.h"
#include "common/run_defaults.h"
#include "common/run_settings.h"
#include "deploy/local/local_cluster.h"
#include "param_server/optimizer.h"
#include "param_server/parameter_server.h"
#include "tests/catch.h"

namespace convoy {
namespace {

TEST_CASE("Every struct that carries a run setting defaults it as the settings table does",
          "[settings]") {
  const AgentRunSettings table;

  const ReplayOptions replay;
  CHECK(replay.n_step == table.n_step);
  CHECK(replay.gamma == table.gamma);
  CHECK(replay.prioritized == table.prioritized);
  CHECK(replay.alpha == table.priority_exponent);

  const LearnerOptions learner;
  CHECK(learner.double_dqn == table.double_dqn);
  CHECK(learner.max_grad_norm == table.max_grad_norm);
  CHECK(learner.learning_rate == run_defaults::kLearningRate);

  const SyncOptions sync;
  CHECK(sync.batch_update_frequency == static_cast<uint64_t>(table.batch_update_frequency));

  const OptimizerOptions optimizer;
  CHECK(optimizer.learning_rate == run_defaults::kLearningRate);

  const ExplorationOptions exploration;
  CHECK(exploration.min_epsilon == run_defaults::kMinEpsilon);
  CHECK(exploration.per_iter_epsilon_reduction == run_defaults::kPerIterEpsilonReduction);

  const AgentOptions agent;
  CHECK(agent.learning_rate == run_defaults::kLearningRate);
  CHECK(agent.min_epsilon == run_defaults::kMinEpsilon);
  CHECK(agent.per_iter_epsilon_reduction == run_defaults::kPerIterEpsilonReduction);

  const LocalClusterOptions launcher;
  CHECK(launcher.learning_rate == run_defaults::kLearningRate);
  CHECK(launcher.min_epsilon == run_defaults::kMinEpsilon);
  CHECK(launcher.per_iter_epsilon_reduction == run_defaults::kPerIterEpsilonReduction);
  CHECK(launcher.average_horizon == run_defaults::kAverageHorizon);
  const RunSettings& launcher_settings = launcher;
  const RunSettings server_table;
  CHECK(launcher_settings.n_step == server_table.n_step);
  CHECK(launcher_settings.batch_update_frequency == server_table.batch_update_frequency);
}

}  // namespace
}  // namespace convoy
