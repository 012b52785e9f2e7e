// An agent's session with the parameter server: joining and adopting the run's settings, pushes and
// pulls with their versions and incarnation, and riding out the server being away.
//
// ParameterServerSession is what the agent's acting/learning loop sees of the server. It is narrow
// on purpose, so that one logical session may also fan out to several servers, each owning a slice
// of the weights; PsSession is the implementation for one server, over one PsClient.
//
// States:
//   connected     after Join, and after Rejoin + Reconnected: Push and Pull go to the server.
//   disconnected  after a push got no answer (it is kept, see has_pending_push()), a pull found the
//                 server unavailable, or Disconnected(): the loop learns locally and calls Rejoin.
//   rejoining     after a successful Rejoin: the server took the Join and the push that got no
//   answer
//                 was resent; the loop pushes what it learned while the server was away, then calls
//                 Reconnected(). A push that gets no answer here makes the session disconnected
//                 again.
// Thread-compatible: one thread at a time (the agent's SessionWorker, once training) makes the
// calls.
#ifndef CONVOY_AGENT_PS_SESSION_H_
#define CONVOY_AGENT_PS_SESSION_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "agent/ps_client.h"
#include "agent/push_log.h"
#include "agent/push_mode.h"
#include "common/security.h"
#include "common/tensor_encoding.h"

namespace convoy {

// Which of the local copies a pull wrote.
struct PullUpdate {
  bool online = false;
  bool target = false;
};

// When Rejoin may try.
enum class RejoinPace {
  kPaced,  // Not before the interval since the previous attempt has passed.
  kNow,    // At once (the last sync of a run).
};

// When a session that lost its server tries to rejoin it. An attempt that failed without an answer
// from the server (refused, unreachable, no connection within the connect timeout, or the
// connection lost) is retried after `after_no_answer`: such a failure costs the server nothing, and
// the link may be back any moment. An attempt that reached the server but was answered late or
// refused (a busy server) waits `after_late_answer`. Time is passed in, so that the pacing is plain
// logic.
class RejoinPacer {
 public:
  struct Options {
    absl::Duration after_no_answer = absl::Milliseconds(300);
    absl::Duration after_late_answer = absl::Seconds(3);
  };
  explicit RejoinPacer(const Options& options) : options_(options) {}

  // The session lost the server at `now`: the first attempt is due after_no_answer later.
  void Lost(absl::Time now) { next_ = now + options_.after_no_answer; }
  // A paced attempt may start at `now`.
  bool Due(absl::Time now) const { return now >= next_; }
  // An attempt that ended at `now` with `outcome` (OK: rejoined, nothing is due until the next
  // loss).
  void Attempted(absl::Time now, const absl::Status& outcome);
  absl::Time next() const { return next_; }

 private:
  const Options options_;
  absl::Time next_ = absl::InfinitePast();
};

// What an agent joins with.
struct JoinOptions {
  std::string model;          // The agent's model (--model); the server's is taken unless pinned.
  bool model_pinned = false;  // --model was given: a server model that differs is refused.
  PushMode push = PushMode::kGradients;  // Checked against the server's update rule.
};

// What a server said on Join.
struct JoinResult {
  v1::RunConfig config;  // The run's settings, model_name among them.
  double epsilon = 0;    // The epsilon the server gives this agent.
};

class ParameterServerSession {
 public:
  virtual ~ParameterServerSession() = default;

  // Start of a run, before the local model is built: joins with the fingerprint of the server's
  // model (options.model when pinned; a pinned one that disagrees is refused), after checking
  // options.push against the server's update rule, and returns what the server said. The agent
  // adopts the settings (AdoptRunConfig). Connected afterwards.
  // Errors: INVALID_ARGUMENT for a pinned model that disagrees with the server's, a push mode the
  // update rule does not take, or an unknown update rule; FAILED_PRECONDITION for a model mismatch;
  // UNAVAILABLE when the server did not answer in time.
  virtual absl::StatusOr<JoinResult> Join(int num_actions, const JoinOptions& options) = 0;

  // After Join and the first Pull: from here on calls give up soon when the server is away, so that
  // the loop keeps learning locally.
  virtual void StartTraining() = 0;

  // Pushes `values` (a mean gradient or a weight change, per the push mode) learned over
  // `minibatch_count` minibatches on the weights of the last pull, exactly once: a push that gets
  // no answer is kept and resent by the next Rejoin, and the session becomes disconnected. A
  // refusal by the server (stale, wrong incarnation, ...) is OK with accepted=false. Connected or
  // rejoining only.
  virtual absl::StatusOr<PushAnswer> Push(absl::Span<const float> values,
                                          uint32_t minibatch_count) = 0;

  // Writes the server's newest weights into *online unless the version held is current, and its
  // target network into *target when the target version the server last announced differs from the
  // one held or the incarnation changed. Errors: the pull's (logged; UNAVAILABLE also makes the
  // session disconnected).
  virtual absl::StatusOr<PullUpdate> Pull(std::vector<float>* online,
                                          std::vector<float>* target) = 0;

  // The loop lost the server: logs why; learning is local until a Rejoin succeeds, the next one not
  // before the rejoin interval.
  virtual void Disconnected(const absl::Status& why) = 0;

  // Disconnected: joins again and resends the push that got no answer, so the server applies it
  // once whether or not it already had. Returns the server's epsilon for this agent; the session is
  // then rejoining. Errors: UNAVAILABLE when not due yet (kPaced), when the server did not answer,
  // or when the resent push got no answer (then disconnected again).
  virtual absl::StatusOr<double> Rejoin(RejoinPace pace) = 0;

  // Rejoining: the loop pushed what it learned meanwhile; in step again. The next Pull takes the
  // server's weights whatever is held.
  virtual void Reconnected() = 0;

  virtual bool connected() const = 0;
  // A push got no answer and has not been resent successfully since.
  virtual bool has_pending_push() const = 0;
  // The server version of the weights last pulled (0 before the first pull).
  virtual uint64_t version() const = 0;
  // The server start those weights came from (0: none yet, or forgotten by Reconnected).
  virtual uint64_t incarnation() const = 0;
  // The servers the session spans: a sharded server's shards, or 1.
  virtual size_t num_shards() const { return 1; }
};

struct PsSessionOptions {
  std::string address;  // host:port
  std::string agent_id;
  uint32_t agent_index = 0;
  TensorEncoding push_encoding = TensorEncoding::kFp32;
  ClientSecurity security = [] {
    ClientSecurity plaintext;
    plaintext.insecure = true;
    return plaintext;
  }();
  // Join at the start waits this long for a server that is still starting.
  absl::Duration join_for = absl::Seconds(60);
  // Once training, calls to a server that is down give up after this, and the loop learns locally.
  absl::Duration retry_while_training = absl::Seconds(2);
  // Once training, each call (a rejoin attempt among them) first connects within this, on a fresh
  // channel after a failure; a silent link's connect is given up then and tried anew, so that the
  // first attempt after a heal connects at once. It bounds a TCP (and TLS) handshake, not an
  // answer.
  absl::Duration connect_timeout = absl::Seconds(1);
  // Rejoin attempts try once: connected within connect_timeout, a Join answered within
  // rejoin_timeout, which is what a reachable but busy server takes to answer (one second was too
  // short on a loaded machine: the server took the Join and the answer came after the deadline). An
  // attempt that got no answer (refused, unreachable, not connected) is retried after rejoin_retry;
  // one that was answered late, after rejoin_every (RejoinPacer). A server that is down thus gets
  // at most 1 / rejoin_retry attempts a second from each agent.
  absl::Duration rejoin_retry = absl::Milliseconds(300);
  absl::Duration rejoin_every = absl::Seconds(3);
  absl::Duration rejoin_timeout = absl::Seconds(3);
  // The shard this server is of a sharded parameter server (common/shard_map.h); 1: unsharded. With
  // more, pushes and pulls carry the shard's slice only.
  uint32_t num_shards = 1;
  uint32_t shard_index = 0;
  // Null: none. Otherwise every answer to a push (a resent one's too) is logged there.
  std::shared_ptr<PushLog> push_log;
};

// The session with one server as ShardedSession drives it: the range of the flat vector it serves,
// and where it stands in an outage.
class ServerSession : public ParameterServerSession {
 public:
  // Rejoined, its catch-up not yet pushed.
  virtual bool rejoining() const = 0;
  // Disconnected, and a paced Rejoin would try now.
  virtual bool rejoin_due() const = 0;
  // After Join: the slice of the flat vector this server serves (the whole vector unsharded).
  virtual uint64_t begin() const = 0;
  virtual uint64_t end() const = 0;
};

// The session with one parameter server.
class PsSession : public ServerSession {
 public:
  // Errors: the channel credentials' (a missing TLS file, TLS neither given nor waived).
  static absl::StatusOr<std::unique_ptr<PsSession>> Create(const PsSessionOptions& options);

  absl::StatusOr<JoinResult> Join(int num_actions, const JoinOptions& options) override;
  void StartTraining() override;
  absl::StatusOr<PushAnswer> Push(absl::Span<const float> values,
                                  uint32_t minibatch_count) override;
  absl::StatusOr<PullUpdate> Pull(std::vector<float>* online, std::vector<float>* target) override;
  void Disconnected(const absl::Status& why) override;
  absl::StatusOr<double> Rejoin(RejoinPace pace) override;
  void Reconnected() override;

  bool connected() const override { return state_ == State::kConnected; }
  bool rejoining() const override { return state_ == State::kRejoining; }
  bool has_pending_push() const override { return ps_->has_pending_push(); }
  bool rejoin_due() const override;
  uint64_t version() const override { return version_; }
  uint64_t incarnation() const override { return incarnation_; }
  uint64_t begin() const override { return begin_; }
  uint64_t end() const override { return end_; }

 private:
  enum class State { kConnected, kDisconnected, kRejoining };

  PsSession(const PsSessionOptions& options, std::unique_ptr<PsClient> client);
  // One rejoin attempt, unpaced.
  absl::StatusOr<double> TryRejoin();

  const PsSessionOptions options_;
  std::unique_ptr<PsClient> ps_;      // Pushes, pulls; Join at the start.
  std::unique_ptr<PsClient> rejoin_;  // Join during an outage; set by StartTraining.
  State state_ = State::kDisconnected;
  uint64_t version_ = 0;
  uint64_t incarnation_ = 0;
  uint64_t target_version_ = 0;         // Of the target weights held.
  uint64_t server_target_version_ = 0;  // The newest the server announced.
  RejoinPacer pacer_;
  uint64_t begin_ = 0, end_ = 0;
  LoggedPush pending_logged_;  // The push that got no answer, as the push log names it.
};

}  // namespace convoy

#endif  // CONVOY_AGENT_PS_SESSION_H_
