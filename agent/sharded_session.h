// ShardedSession: one agent's session with a sharded parameter server, N convoy_ps processes each
// serving one contiguous range of the flat parameter vector (common/shard_map.h).
//
// It fans every call out to the N shards' own PsSessions in parallel: a push sends each shard its
// range of the values, a pull assembles the shards' ranges into the whole vector. Each shard keeps
// its own versions, incarnation and exactly-once pushes. The agent loop sees one session:
//   - Join joins shard 0 first (the run settings and epsilon are its), then the others;
//   - connected() while at least one shard is (see the class comment): a shard that is away is
//     the session's own business (its backlog, its paced rejoin); only with every shard away does
//     the agent learn locally and Rejoin, which rejoins the shards that are away (each resending
//     its own push that got no answer), so every shard receives every slice once;
//   - version() is the sum of the shards' versions (it grows whenever any shard's does; the agent
//     shows it as a sum), and incarnation() shard 0's.
// Thread-compatible, like PsSession.
#ifndef CONVOY_AGENT_SHARDED_SESSION_H_
#define CONVOY_AGENT_SHARDED_SESSION_H_

#include <future>
#include <memory>
#include <string>
#include <vector>

#include "agent/outage_backlog.h"
#include "agent/ps_session.h"

namespace convoy {

// The parameter servers an agent's --ps names: "host:port" or, for a sharded server,
// "host:port,host:port,..." in shard order; or "@FILE", a file listing them in shard order (one or
// more per line, separated by commas or blanks; '#' starts a comment). Errors: INVALID_ARGUMENT for
// an empty address, a file entry without a port or a file that lists none; a file that cannot be
// read, its read error.
absl::StatusOr<std::vector<std::string>> ParseServerList(absl::string_view ps);

// A PsSession for one of `servers`, a ShardedSession for several (shard i at servers[i]), each with
// `common`'s options. `push` says how a sharded session's backlogs add up. Errors: the channel
// credentials'.
absl::StatusOr<std::unique_ptr<ParameterServerSession>> CreateSession(
    const std::vector<std::string>& servers, const PsSessionOptions& common, PushMode push);

// The session with every shard of a sharded parameter server, pushes and pulls fanned out in
// parallel.
//
// One shard away does not stop the others. While at least one shard is in step the session is
// connected: each push goes to the shards in step, and each away shard's range goes into that
// shard's backlog (the minibatch-weighted mean of the gradients, or the sum of the weight changes,
// as the push mode says). Each pull starts a rejoin attempt of an away shard when its session's
// pacing says one is due, on a thread of the shard's own, and never waits for it: the others'
// exchanges take what they take with every shard up. The first pull after an attempt took pushes
// that shard its backlog as one catch-up of all those minibatches, and takes its weights again.
// Meanwhile the agent keeps that shard's range as last pulled. Only with every shard away is the
// session disconnected, and the agent's own outage handling (learn locally, Rejoin, catch up) takes
// over; Rejoin then also pushes each rejoined shard its backlog. has_pending_push() is true while
// any backlog is owed.
class ShardedSession : public ParameterServerSession {
 public:
  // One options per shard, in shard order (num_shards and shard_index set). `push` says how
  // backlogs add up.
  static absl::StatusOr<std::unique_ptr<ShardedSession>> Create(
      const std::vector<PsSessionOptions>& shards, PushMode push);
  // Over sessions already made, in shard order (tests drive it over fakes).
  ShardedSession(std::vector<std::unique_ptr<ServerSession>> shards, PushMode push);

  absl::StatusOr<JoinResult> Join(int num_actions, const JoinOptions& options) override;
  void StartTraining() override;
  absl::StatusOr<PushAnswer> Push(absl::Span<const float> values,
                                  uint32_t minibatch_count) override;
  absl::StatusOr<PullUpdate> Pull(std::vector<float>* online, std::vector<float>* target) override;
  void Disconnected(const absl::Status& why) override;
  absl::StatusOr<double> Rejoin(RejoinPace pace) override;
  void Reconnected() override;

  bool connected() const override;
  bool has_pending_push() const override;
  uint64_t version() const override;
  uint64_t incarnation() const override { return shards_[0]->incarnation(); }
  size_t num_shards() const override { return shards_.size(); }

 private:
  // In step or rejoining: takes pushes. A shard whose rejoin attempt is in flight is away (and its
  // session is its attempt's thread's until it ends).
  bool Live(size_t shard) const {
    return !rejoin_[shard].valid() && (shards_[shard]->connected() || shards_[shard]->rejoining());
  }
  // Takes in shard `shard`'s rejoin attempt when it has ended (any time with `wait`): true when it
  // rejoined. Without an attempt in flight, false.
  bool RejoinEnded(size_t shard, bool wait);
  // Pushes what shard `shard` is owed (rejoining), then clears it. Errors: the push's when it got
  // no answer (the shard is away again and its session resends it); a refusal is logged and lost.
  absl::Status PushBacklog(size_t shard);

  std::vector<std::unique_ptr<ServerSession>> shards_;
  // Each away shard's rejoin attempt in flight (valid), started by a pull. Declared after shards_,
  // so that it is waited for before they go.
  std::vector<std::future<absl::StatusOr<double>>> rejoin_;
  // What each shard is owed from pushes made while it was away, of its range.
  std::vector<OutageBacklog> backlog_;
  // Each shard's pull lands here, then its range is copied into place.
  std::vector<std::vector<float>> online_, target_;
  uint64_t model_parameter_count_ = 0;
  double epsilon_ = 0;
};

}  // namespace convoy

#endif  // CONVOY_AGENT_SHARDED_SESSION_H_
