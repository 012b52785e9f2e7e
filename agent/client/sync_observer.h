// SyncObserver: what an agent's exchanges with its parameter servers show to whoever watches them,
// as the server's apply log watches its applies. The agent loop and the transports call it; they
// know nothing of what it does. The audit trail of the chaos runs (agent/client/push_log.h) is one.
#ifndef CONVOY_AGENT_CLIENT_SYNC_OBSERVER_H_
#define CONVOY_AGENT_CLIENT_SYNC_OBSERVER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "common/wire/push_answer.h"

namespace convoy::agent {

// The push an answer is for.
struct LoggedPush {
  std::string agent_id;
  uint64_t session = 0;
  uint64_t sequence = 0;
  uint32_t shard = 0;  // 0 unsharded.
  uint32_t minibatches = 0;
  uint64_t base_incarnation = 0;  // The weights it was computed on (0: unknown).
  uint64_t base_version = 0;
};

// Called on the acting thread (Trained) and on each server's exchange thread (Answered, Pushed,
// Pulled): an observer is thread-safe.
class SyncObserver {
 public:
  virtual ~SyncObserver() = default;
  // `minibatches`: trained so far by this process, counting the one just trained.
  virtual void Trained(const std::string& agent_id, uint64_t minibatches) = 0;
  // A server answered `push` (a resent push's answer too).
  virtual void Answered(const LoggedPush& push, const PushAnswer& answer) = 0;
  // A push to server `shard` ended after `time`, answered or not (`answered`).
  virtual void Pushed(uint32_t /*shard*/, absl::Duration /*time*/, bool /*answered*/) {}
  // A pull from server `shard` ended after `time`: the weights or none newer (`ok`), or it failed.
  virtual void Pulled(uint32_t /*shard*/, absl::Duration /*time*/, bool /*ok*/) {}
};

// Tells each of several observers, in order.
class SyncObservers : public SyncObserver {
 public:
  explicit SyncObservers(std::vector<std::shared_ptr<SyncObserver>> observers)
      : observers_(std::move(observers)) {}
  void Trained(const std::string& agent_id, uint64_t minibatches) override {
    for (const auto& o : observers_) o->Trained(agent_id, minibatches);
  }
  void Answered(const LoggedPush& push, const PushAnswer& answer) override {
    for (const auto& o : observers_) o->Answered(push, answer);
  }
  void Pushed(uint32_t shard, absl::Duration time, bool answered) override {
    for (const auto& o : observers_) o->Pushed(shard, time, answered);
  }
  void Pulled(uint32_t shard, absl::Duration time, bool ok) override {
    for (const auto& o : observers_) o->Pulled(shard, time, ok);
  }

 private:
  const std::vector<std::shared_ptr<SyncObserver>> observers_;
};

}  // namespace convoy::agent

#endif  // CONVOY_AGENT_CLIENT_SYNC_OBSERVER_H_
