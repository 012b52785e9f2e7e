// ServerExploration: the run's exploration schedule (common/settings/exploration.h) as a part of the server
// (server_part.h): the global epsilon falls by per_iter_epsilon_reduction for every applied push
// (however many pushes one step combines, so the schedule runs on the agents' experience, as the
// cookbook's did), each agent is answered with its epsilon, and the epsilon is checkpointed.
#ifndef CONVOY_PARAM_SERVER_CORE_SERVER_EXPLORATION_H_
#define CONVOY_PARAM_SERVER_CORE_SERVER_EXPLORATION_H_

#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/settings/exploration.h"
#include "param_server/core/server_part.h"

namespace convoy::ps {

class ServerExploration : public ServerPart {
 public:
  explicit ServerExploration(const ExplorationOptions& options) : schedule_(options) {}

  void Applied(absl::Mutex& mu, const AppliedStep& step) override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    for (size_t i = 0; i < step.pushes.size(); ++i) schedule_.OnUpdateApplied();
  }
  absl::Status SaveTo(absl::Mutex& mu, CheckpointData& data) const override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    data.manifest.set_epsilon(schedule_.global_epsilon());
    return absl::OkStatus();
  }
  absl::Status Restore(absl::Mutex& mu, LoadedCheckpoint& checkpoint) override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    schedule_.set_global_epsilon(checkpoint.manifest.epsilon());
    return absl::OkStatus();
  }

  // The epsilon agent `agent_index` acts with now. (The server holds this part under its writer
  // lock, ABSL_GUARDED_BY, so these are read under it too.)
  double EpsilonFor(uint32_t agent_index) const { return schedule_.EpsilonFor(agent_index); }
  double global_epsilon() const { return schedule_.global_epsilon(); }

 private:
  ExplorationSchedule schedule_;
};

}  // namespace convoy::ps

#endif  // CONVOY_PARAM_SERVER_CORE_SERVER_EXPLORATION_H_
