// The agent's transport to each parameter server: Join, Push, Pull and Resend, each returning a
// Status, with no state machine (ps-lite's KVWorker). Where an agent stands with a server (in step,
// away, back) and what each server is owed are ParameterServerSync's alone
// (agent/client/parameter_server_sync.h), for one server and for every shard of a sharded one
// alike.
//
// A sharded parameter server is N convoy_ps processes, each serving one contiguous range of the
// flat parameter vector (common/model/shard_map.h): an agent holds one transport per shard, each pushing
// and pulling its own range.
#ifndef CONVOY_AGENT_CLIENT_PS_TRANSPORT_H_
#define CONVOY_AGENT_CLIENT_PS_TRANSPORT_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "agent/client/ps_client.h"
#include "agent/client/push_mode.h"
#include "agent/client/sync_observer.h"
#include "common/wire/security.h"
#include "common/wire/tensor_encoding.h"

namespace convoy::agent {

// Which of the local copies a pull wrote.
struct PullUpdate {
  bool online = false;
  bool target = false;
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

// One server, as the sync drives it. Thread-compatible: one thread at a time (the server's own
// worker in ParameterServerSync, once training) makes the calls.
class ServerTransport {
 public:
  virtual ~ServerTransport() = default;

  // Start of a run, before the local model is built: joins with the fingerprint of the server's
  // model (options.model when pinned), after checking options.push against the server's update
  // rule, and returns what the server said. Waits for a server that is still starting.
  // Errors: INVALID_ARGUMENT for a pinned model that disagrees with the server's, a push mode the
  // update rule does not take, or an unknown update rule; FAILED_PRECONDITION for a model mismatch;
  // UNAVAILABLE when the server did not answer in time.
  virtual absl::StatusOr<JoinResult> Join(int num_actions, const JoinOptions& options) = 0;

  // After Join and the first Pull: from here on calls give up soon when the server is away.
  virtual void StartTraining() = 0;

  // Pushes `values` (this server's range of a mean gradient or a weight change, per the push mode)
  // learned over `minibatches` minibatches on the weights of the last pull, exactly once: a push
  // that gets no answer is kept (has_pending_push()) and sent again by the next Resend. A refusal
  // by the server (stale, wrong incarnation, ...) is OK with accepted=false.
  virtual absl::StatusOr<PushAnswer> Push(absl::Span<const float> values, uint32_t minibatches) = 0;

  // Writes the server's newest weights of this server's range into *online unless the version held
  // is current (with `whatever_held`: in any case, as after learning locally), and its target
  // network into *target when the target version the server last announced differs from the one
  // held or the server started anew.
  virtual absl::StatusOr<PullUpdate> Pull(std::vector<float>* online, std::vector<float>* target,
                                          bool whatever_held) = 0;

  // A push and, once it is answered, the pull after it, with how long each took.
  struct Exchange {
    absl::StatusOr<PushAnswer> pushed = absl::UnknownError("not pushed");
    std::optional<absl::StatusOr<PullUpdate>> pulled;  // Absent when the push got no answer.
    absl::Duration push_time;
    absl::Duration pull_time;
  };
  // Push, then Pull once the push is answered. A transport may send the pull's request before the
  // answer comes, as long as the weights it brings hold the push when it was applied.
  virtual Exchange PushThenPull(absl::Span<const float> values, uint32_t minibatches,
                                std::vector<float>* online, std::vector<float>* target,
                                bool whatever_held) {
    Exchange exchange;
    const absl::Time start = absl::Now();
    exchange.pushed = Push(values, minibatches);
    exchange.push_time = absl::Now() - start;
    if (exchange.pushed.ok()) {
      const absl::Time pull_start = absl::Now();
      exchange.pulled = Pull(online, target, whatever_held);
      exchange.pull_time = absl::Now() - pull_start;
    }
    return exchange;
  }

  // One attempt to join again after the server was away: the Join, then the push that got no
  // answer sent again under its number, so that the server applies it once whether or not it
  // already had. Returns the server's epsilon for this agent. Errors: the Join's; UNAVAILABLE when
  // the push sent again got no answer (it stays kept).
  virtual absl::StatusOr<double> Resend() = 0;

  // A push got no answer and has not been sent again successfully since.
  virtual bool has_pending_push() const = 0;
  // The server version of the weights last pulled (0 before the first pull).
  virtual uint64_t version() const = 0;
  // The server start those weights came from (0: none yet).
  virtual uint64_t incarnation() const = 0;
  // After Join: the range of the flat vector this server serves (the whole vector unsharded).
  virtual uint64_t begin() const = 0;
  virtual uint64_t end() const = 0;
};

struct PsTransportOptions {
  std::string address;  // host:port
  std::string agent_id;
  uint32_t agent_index = 0;
  TensorEncoding push_encoding = TensorEncoding::kFp32;
  ClientSecurity security = [] {
    ClientSecurity plaintext;
    plaintext.insecure = true;
    return plaintext;
  }();
  // Each call's attempt (the rejoin's Join has rejoin_timeout).
  absl::Duration call_timeout = absl::Seconds(30);
  // Join at the start waits this long for a server that is still starting.
  absl::Duration join_for = absl::Seconds(60);
  // Once training, calls to a server that is down give up after this, and the agent learns
  // locally.
  absl::Duration retry_while_training = absl::Seconds(2);
  // Once training, each call (a Resend among them) first connects within this, on a fresh channel
  // after a failure; a silent link's connect is given up then and tried anew, so that the first
  // attempt after a heal connects at once. It bounds a TCP (and TLS) handshake, not an answer.
  absl::Duration connect_timeout = absl::Seconds(1);
  // A Resend tries once: connected within connect_timeout, its Join answered within
  // rejoin_timeout, which is what a reachable but busy server takes to answer.
  absl::Duration rejoin_timeout = absl::Seconds(3);
  // The shard this server is of a sharded parameter server (common/model/shard_map.h); 1: unsharded.
  uint32_t num_shards = 1;
  uint32_t shard_index = 0;
};

// The transport to one parameter server, over a PsClient.
class PsTransport : public ServerTransport {
 public:
  // Errors: the channel credentials' (a missing TLS file, TLS neither given nor waived).
  // `observer` (none: null) is told every answer to a push, a resent one's too.
  static absl::StatusOr<std::unique_ptr<PsTransport>> Create(
      const PsTransportOptions& options, std::shared_ptr<SyncObserver> observer = nullptr);

  absl::StatusOr<JoinResult> Join(int num_actions, const JoinOptions& options) override;
  void StartTraining() override;
  absl::StatusOr<PushAnswer> Push(absl::Span<const float> values, uint32_t minibatches) override;
  // The pull's request goes right behind the push's last chunk (PsClient::PushThenPull).
  Exchange PushThenPull(absl::Span<const float> values, uint32_t minibatches,
                        std::vector<float>* online, std::vector<float>* target,
                        bool whatever_held) override;
  absl::StatusOr<PullUpdate> Pull(std::vector<float>* online, std::vector<float>* target,
                                  bool whatever_held) override;
  absl::StatusOr<double> Resend() override;

  bool has_pending_push() const override { return ps_->has_pending_push(); }
  uint64_t version() const override { return version_; }
  uint64_t incarnation() const override { return incarnation_; }
  uint64_t begin() const override { return begin_; }
  uint64_t end() const override { return end_; }
  // The push session and the sequence number the next push carries (the synthetic agent's
  // replayable gradients are a function of them).
  uint64_t push_session() const { return ps_->push_session(); }
  uint64_t next_sequence() const { return ps_->next_sequence(); }

 private:
  // What a push's and a pull's results do to this transport: the observer told, the versions held.
  absl::StatusOr<PushAnswer> Pushed(absl::StatusOr<PushAnswer> pushed, uint32_t minibatches);
  absl::StatusOr<PullUpdate> Pulled(absl::StatusOr<PullResult> pulled, std::vector<float>* target);
  PsTransport(const PsTransportOptions& options, std::unique_ptr<PsClient> client,
              std::shared_ptr<SyncObserver> observer);

  const PsTransportOptions options_;
  const std::shared_ptr<SyncObserver> observer_;  // Null: none.
  std::unique_ptr<PsClient> ps_;      // Pushes, pulls; Join at the start.
  std::unique_ptr<PsClient> rejoin_;  // Join during an outage; set by StartTraining.
  uint64_t version_ = 0;
  uint64_t incarnation_ = 0;
  uint64_t target_version_ = 0;         // Of the target weights held.
  uint64_t server_target_version_ = 0;  // The newest the server announced.
  uint64_t begin_ = 0, end_ = 0;
  LoggedPush pending_logged_;  // The push that got no answer, as the observer is told it.
};

// The parameter servers an agent's --ps names: "host:port" or, for a sharded server,
// "host:port,host:port,..." in shard order; or "@FILE", a file listing them in shard order (one or
// more per line, separated by commas or blanks; '#' starts a comment). Errors: INVALID_ARGUMENT for
// an empty address, a file entry without a port or a file that lists none; a file that cannot be
// read, its read error.
absl::StatusOr<std::vector<std::string>> ParseServerList(absl::string_view ps);

// A transport to each of `servers` (shard i at servers[i]), each with `common`'s options and, for
// several, its shard, all telling `observer`. Errors: the channel credentials'.
absl::StatusOr<std::vector<std::unique_ptr<ServerTransport>>> CreateTransports(
    const std::vector<std::string>& servers, const PsTransportOptions& common,
    std::shared_ptr<SyncObserver> observer = nullptr);

// Joins every server: shard 0 first (its run settings and epsilon are the run's), then the others
// at once, with the same model, which they serve too. Errors: the first Join's that failed.
absl::StatusOr<JoinResult> JoinServers(const std::vector<ServerTransport*>& servers,
                                       int num_actions, const JoinOptions& options);

}  // namespace convoy::agent

#endif  // CONVOY_AGENT_CLIENT_PS_TRANSPORT_H_
