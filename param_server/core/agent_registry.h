// AgentRegistry: what the server knows of each agent that joined, pushed or pulled: its host and
// index (from Join), when it was last seen and its pushes' fate. Status lists it; Apply asks it for
// an agent's index, which picks the agent's epsilon.
//
// Thread-safe. It holds no checkpointed state: a restarted server learns its agents again.
#ifndef CONVOY_PARAM_SERVER_CORE_AGENT_REGISTRY_H_
#define CONVOY_PARAM_SERVER_CORE_AGENT_REGISTRY_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/wire/push_answer.h"
#include "convoy/v1/parameter_server.pb.h"

namespace convoy::ps {

class AgentRegistry {
 public:
  // `clock` stamps last_seen; tests pass their own.
  explicit AgentRegistry(std::function<absl::Time()> clock = absl::Now)
      : clock_(std::move(clock)) {}

  // An agent joined from `hostname` as agent `index`.
  void Joined(const std::string& agent_id, const std::string& hostname, uint32_t index)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Marks the agent seen now and returns its index (0 for one that never joined).
  uint32_t Seen(const std::string& agent_id) ABSL_LOCKS_EXCLUDED(mu_);
  // The answer to one of its pushes that passed validation: its staleness and whether it applied.
  void Answered(const std::string& agent_id, const PushAnswer& outcome) ABSL_LOCKS_EXCLUDED(mu_);
  // One of its pushes was refused before the policy saw it (malformed); marks it seen.
  void Refused(const std::string& agent_id) ABSL_LOCKS_EXCLUDED(mu_);

  // Appends every agent, in agent_id order.
  void AddTo(v1::StatusResponse& status) const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Record {
    std::string hostname;
    uint32_t index = 0;
    absl::Time last_seen = absl::InfinitePast();
    uint64_t last_staleness = 0;
    uint64_t accepted = 0;
    uint64_t rejected = 0;
  };
  Record& Touch(const std::string& agent_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::function<absl::Time()> clock_;
  mutable absl::Mutex mu_;
  std::map<std::string, Record> agents_ ABSL_GUARDED_BY(mu_);
};

}  // namespace convoy::ps

#endif  // CONVOY_PARAM_SERVER_CORE_AGENT_REGISTRY_H_
