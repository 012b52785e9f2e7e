#include "param_server/followed_pushes.h"

namespace convoy {

uint64_t FollowedPushes::Await(const Push& push, Ready ready) {
  absl::MutexLock lock(&mu_);
  auto it = newest_.find(push.agent_id);
  if (it != newest_.end() && Covers(it->second, push)) return 0;
  const uint64_t id = next_id_++;
  waits_.emplace(id, Wait{push, absl::Now(), std::move(ready)});
  return id;
}

bool FollowedPushes::Cancel(uint64_t id) {
  absl::MutexLock lock(&mu_);
  return waits_.erase(id) > 0;
}

void FollowedPushes::Decided(const Push& push) {
  std::vector<Ready> run;
  {
    absl::MutexLock lock(&mu_);
    Newest& newest = newest_[push.agent_id];
    if (newest.session != push.session || newest.sequence < push.sequence) {
      newest = Newest{push.session, push.sequence};
    }
    for (auto it = waits_.begin(); it != waits_.end();) {
      if (it->second.push.agent_id == push.agent_id && Covers(newest, it->second.push)) {
        run.push_back(std::move(it->second.ready));
        waits_.erase(it++);
      } else {
        ++it;
      }
    }
  }
  for (Ready& ready : run) std::move(ready)();
}

size_t FollowedPushes::Expire(absl::Time before) {
  std::vector<Ready> run;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = waits_.begin(); it != waits_.end();) {
      if (it->second.since < before) {
        run.push_back(std::move(it->second.ready));
        waits_.erase(it++);
      } else {
        ++it;
      }
    }
  }
  for (Ready& ready : run) std::move(ready)();
  return run.size();
}

size_t FollowedPushes::waiting() const {
  absl::MutexLock lock(&mu_);
  return waits_.size();
}

}  // namespace convoy
