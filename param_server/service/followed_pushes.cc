#include "param_server/service/followed_pushes.h"

#include <algorithm>

namespace convoy::ps {

uint64_t FollowedPushes::Await(const Push& push, Ready ready) {
  absl::MutexLock lock(&mu_);
  auto it = newest_.find(push.agent_id);
  if (it != newest_.end() && Covers(it->second, push)) return 0;
  const uint64_t id = next_id_++;
  waits_.emplace(id, Wait{push, absl::Now(), std::move(ready)});
  by_agent_[push.agent_id].push_back(id);
  return id;
}

bool FollowedPushes::Cancel(uint64_t id) {
  absl::MutexLock lock(&mu_);
  auto it = waits_.find(id);
  if (it == waits_.end()) return false;
  Forget(it);
  return true;
}

void FollowedPushes::Forget(absl::flat_hash_map<uint64_t, Wait>::iterator wait) {
  auto agent = by_agent_.find(wait->second.push.agent_id);
  std::vector<uint64_t>& ids = agent->second;
  ids.erase(std::find(ids.begin(), ids.end(), wait->first));
  if (ids.empty()) by_agent_.erase(agent);
  waits_.erase(wait);
}

void FollowedPushes::Decided(const Push& push) {
  std::vector<Ready> run;
  {
    absl::MutexLock lock(&mu_);
    Newest& newest = newest_[push.agent_id];
    if (newest.session != push.session || newest.sequence < push.sequence) {
      newest = Newest{push.session, push.sequence};
    }
    // Only this agent's waits: a push costs the pulls of its agent, not of every agent.
    auto agent = by_agent_.find(push.agent_id);
    if (agent != by_agent_.end()) {
      std::vector<uint64_t> ids = agent->second;
      for (uint64_t id : ids) {
        auto wait = waits_.find(id);
        if (!Covers(newest, wait->second.push)) continue;
        run.push_back(std::move(wait->second.ready));
        Forget(wait);
      }
    }
  }
  for (Ready& ready : run) std::move(ready)();
}

size_t FollowedPushes::Expire(absl::Time before) {
  std::vector<Ready> run;
  {
    absl::MutexLock lock(&mu_);
    std::vector<uint64_t> expired;
    for (const auto& [id, wait] : waits_) {
      if (wait.since < before) expired.push_back(id);
    }
    for (uint64_t id : expired) {
      auto wait = waits_.find(id);
      run.push_back(std::move(wait->second.ready));
      Forget(wait);
    }
  }
  for (Ready& ready : run) std::move(ready)();
  return run.size();
}

size_t FollowedPushes::waiting() const {
  absl::MutexLock lock(&mu_);
  return waits_.size();
}

}  // namespace convoy::ps
