// FollowedPushes: pulls that follow a push. A pull may name the push it follows (its agent, push
// session and sequence; PullRequest.after_sequence), sent right behind the push's last chunk. It is
// answered once that push is decided (applied, refused by policy, a repeat, or refused at the
// edge), so that the weights it carries hold the push when it was applied, and the push's answer
// and the weights leave back to back without a round trip between them (docs/protocol.md, "A pull
// that follows its push").
//
// Per agent it remembers the newest decided push (its session and sequence), so a pull that comes
// after its push was decided goes ahead at once. Thread-safe; `ready` never runs under its lock.
#ifndef CONVOY_PARAM_SERVER_SERVICE_FOLLOWED_PUSHES_H_
#define CONVOY_PARAM_SERVER_SERVICE_FOLLOWED_PUSHES_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace convoy::ps {

class FollowedPushes {
 public:
  using Ready = absl::AnyInvocable<void() &&>;
  struct Push {
    std::string agent_id;
    uint64_t session = 0;
    uint64_t sequence = 0;
  };

  FollowedPushes() = default;
  FollowedPushes(const FollowedPushes&) = delete;
  FollowedPushes& operator=(const FollowedPushes&) = delete;

  // 0 when `push` is decided already (`ready` is dropped: the caller goes on); else keeps `ready`
  // until the push is decided or the wait expires, and returns the id to Cancel it with. `ready`
  // may run on another thread before Await returns.
  uint64_t Await(const Push& push, Ready ready) ABSL_LOCKS_EXCLUDED(mu_);

  // Withdraws a wait. True: its `ready` will never run. False: it ran or is running.
  bool Cancel(uint64_t id) ABSL_LOCKS_EXCLUDED(mu_);

  // `push` is decided: runs the waits for it and for the earlier pushes of its session.
  void Decided(const Push& push) ABSL_LOCKS_EXCLUDED(mu_);

  // Runs the waits that began before `before` (their push never came), and returns how many.
  size_t Expire(absl::Time before) ABSL_LOCKS_EXCLUDED(mu_);

  size_t waiting() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Wait {
    Push push;
    absl::Time since;
    Ready ready;
  };
  struct Newest {
    uint64_t session = 0;
    uint64_t sequence = 0;
  };
  static bool Covers(const Newest& newest, const Push& push) {
    return newest.session == push.session && newest.sequence >= push.sequence;
  }

  // Drops a wait from both maps.
  void Forget(absl::flat_hash_map<uint64_t, Wait>::iterator wait)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  absl::flat_hash_map<uint64_t, Wait> waits_ ABSL_GUARDED_BY(mu_);
  // The ids of each agent's waits (one or two: an agent's pull follows its newest push).
  absl::flat_hash_map<std::string, std::vector<uint64_t>> by_agent_ ABSL_GUARDED_BY(mu_);
  // The newest decided push of each agent that has had a pull wait or a push decided.
  absl::flat_hash_map<std::string, Newest> newest_ ABSL_GUARDED_BY(mu_);
};

}  // namespace convoy::ps

#endif  // CONVOY_PARAM_SERVER_SERVICE_FOLLOWED_PUSHES_H_
