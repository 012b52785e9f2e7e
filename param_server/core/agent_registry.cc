#include "param_server/core/agent_registry.h"

namespace convoy::ps {

AgentRegistry::Record& AgentRegistry::Touch(const std::string& agent_id) {
  Record& record = agents_[agent_id];
  record.last_seen = clock_();
  return record;
}

void AgentRegistry::Joined(const std::string& agent_id, const std::string& hostname,
                           uint32_t index) {
  absl::MutexLock lock(&mu_);
  Record& record = Touch(agent_id);
  record.hostname = hostname;
  record.index = index;
}

uint32_t AgentRegistry::Seen(const std::string& agent_id) {
  absl::MutexLock lock(&mu_);
  return Touch(agent_id).index;
}

void AgentRegistry::Answered(const std::string& agent_id, const PushAnswer& outcome) {
  absl::MutexLock lock(&mu_);
  Record& record = agents_[agent_id];
  record.last_staleness = outcome.staleness;
  ++(outcome.accepted ? record.accepted : record.rejected);
}

void AgentRegistry::Refused(const std::string& agent_id) {
  absl::MutexLock lock(&mu_);
  ++Touch(agent_id).rejected;
}

void AgentRegistry::AddTo(v1::StatusResponse& status) const {
  absl::MutexLock lock(&mu_);
  for (const auto& [id, record] : agents_) {
    v1::AgentStatus* agent = status.add_agents();
    agent->set_agent_id(id);
    agent->set_hostname(record.hostname);
    agent->set_last_seen_unix_ms(absl::ToUnixMillis(record.last_seen));
    agent->set_last_staleness(record.last_staleness);
    agent->set_pushes_accepted(record.accepted);
    agent->set_pushes_rejected(record.rejected);
  }
}

}  // namespace convoy::ps
