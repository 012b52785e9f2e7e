// No struct that carries a run setting may default it differently from the table that declares it
// (common/settings/run_settings.h, common/settings/agent_settings.h, common/settings/run_defaults.h): a struct made without
// the table, a test's or a tool's, must behave as a run does.
#include "agent/agent.h"
#include "agent/client/parameter_server_sync.h"
#include "agent/learning/learner.h"
#include "agent/learning/replay_memory.h"
#include "common/settings/agent_settings.h"
#include "common/settings/exploration.h"
#include "common/settings/run_defaults.h"
#include "common/settings/run_settings.h"
#include "deploy/local/local_cluster.h"
#include "param_server/core/optimizer.h"
#include "param_server/core/parameter_server.h"
#include "tests/catch.h"

namespace convoy::deploy {
namespace {

TEST_CASE("Every struct that carries a run setting defaults it as the settings table does",
          "[settings]") {
  // AgentOptions, ParameterServerOptions and LocalClusterOptions extend the tables' structs, so
  // their defaults are the tables'; the structs of the parts below carry copies, which a run sets
  // from the tables, and default them alike.
  const RunSettings table;
  const AgentSettings own;

  const agent::ReplayOptions replay;
  CHECK(replay.n_step == table.n_step);
  CHECK(replay.gamma == table.gamma);
  CHECK(replay.prioritized == table.prioritized);
  CHECK(replay.alpha == table.priority_exponent);
  CHECK(replay.capacity == own.replay_memory_size);

  const agent::LearnerOptions learner;
  CHECK(learner.double_dqn == table.double_dqn);
  CHECK(learner.max_grad_norm == table.learner_max_grad_norm);
  CHECK(learner.learning_rate == table.learning_rate);
  CHECK(learner.amp == own.amp);

  const agent::SyncOptions sync;
  CHECK(sync.batch_update_frequency == static_cast<uint64_t>(table.batch_update_frequency));

  const ps::OptimizerOptions optimizer;
  CHECK(optimizer.learning_rate == table.learning_rate);

  const ExplorationOptions exploration;
  CHECK(exploration.min_epsilon == table.min_epsilon);
  CHECK(exploration.per_iter_epsilon_reduction == table.per_iter_epsilon_reduction);

  // The settings beside the tables.
  const LocalClusterOptions launcher;
  const ps::ParameterServerOptions server;
  const agent::AgentOptions agent;
  CHECK(launcher.average_horizon == run_defaults::kAverageHorizon);
  // convoy_train's follows its length: 3,000 for its default 10 minutes, 9,000 for 30.
  CHECK(LocalAverageHorizon(absl::Minutes(10)) == 3000);
  CHECK(LocalAverageHorizon(absl::Minutes(30)) == 9000);
  CHECK(LocalAverageHorizon(absl::Seconds(90)) == 450);
  CHECK(LocalAverageHorizon(absl::Seconds(1)) == 5);
  CHECK(LocalAverageHorizon(absl::Milliseconds(1)) == 1);
  CHECK(server.average_horizon == run_defaults::kAverageHorizon);
  CHECK(agent.model == run_defaults::kLocalModel);
  CHECK(launcher.model == run_defaults::kLocalModel);
  // A launcher's run is one machine's: the table's settings but for those kLocalRunSettings
  // changes, which reach convoy_ps as its flags.
  CHECK(RunSettingArgs(launcher) == RunSettingArgs(run_defaults::kLocalRunSettings));
  CHECK(launcher.batch_update_frequency == 1);
  CHECK(RunSettingArgs(server) == RunSettingArgs(table));
}

}  // namespace
}  // namespace convoy::deploy
