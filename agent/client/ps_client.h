// PsClient: the agent's side of the parameter server, in four verbs: Join, Push, Pull, Status.
//
// Every call has a deadline. A call that fails with UNAVAILABLE (the server is down or restarting)
// is retried with exponential backoff and jitter until `retry_for` has passed, so an agent rides
// out a PS restart; a push the server refused as busy (RESOURCE_EXHAUSTED with a retry pushback,
// docs/protocol.md "A busy server") is retried likewise, after at least the delay it named. After
// `retry_for` both are UNAVAILABLE; other errors are returned at once. Thread-compatible: one
// PsClient per agent thread.
//
// Partitions: a call in flight on a silent link (a dead switch: nothing arrives, nothing says so)
// fails once what it sent has gone unacknowledged for `silent_link_timeout`, not at its deadline.
// With `connect_timeout` set, each attempt first makes sure of a connection within that time, on a
// fresh channel whenever the last one is not connected: after a heal the next attempt connects at
// once, instead of waiting out gRPC's reconnect backoff or a connect stuck in SYN retransmission.
//
// Pushes are exactly-once: each PsClient is a push session (a random nonzero id) numbering its
// pushes 1, 2, 3, ...; every retry of one push carries the same number, so the server applies it at
// most once and answers a repeat with the first answer. A push that got no answer (UNAVAILABLE
// after retry_for, or its deadline passed) may or may not have been applied: it is kept, and
// ResendPendingPush() sends it again under its number once the server is back, so it is applied
// exactly once either way.
//
// Pushes and pulls use the zero-copy chunks of common/wire/tensor_chunk.h: a push's data is encoded
// once, into gRPC's own slice, and a pull's data is decoded from the received slices into the
// weights.
#ifndef CONVOY_AGENT_CLIENT_PS_CLIENT_H_
#define CONVOY_AGENT_CLIENT_PS_CLIENT_H_

#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/rpc_method.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/support/backoff.h"
#include "common/wire/push_answer.h"
#include "common/wire/security.h"
#include "common/wire/tensor_chunk.h"
#include "common/wire/tensor_encoding.h"
#include "convoy/v1/parameter_server.grpc.pb.h"

namespace convoy::agent {

struct PsClientOptions {
  std::string address;  // host:port
  std::string agent_id;
  std::string hostname;
  uint32_t agent_index = 0;
  std::string model_fingerprint;
  // The shard Join says this server is (JoinRequest.num_shards etc.); 0 shards: an unsharded
  // server.
  uint32_t num_shards = 0;
  uint32_t shard_index = 0;
  std::string shard_map_digest;
  TensorEncoding push_encoding = TensorEncoding::kFp32;
  TensorEncoding pull_encoding = TensorEncoding::kFp32;
  absl::Duration call_timeout = absl::Seconds(30);  // Per attempt.
  absl::Duration retry_for = absl::Seconds(60);     // Total time UNAVAILABLE calls are retried.
  // Infinite: gRPC connects as it does (within the call's deadline, with its reconnect backoff).
  // Otherwise the wait for a connection before each attempt, whose failure (refused, unreachable,
  // or not connected in time) fails the attempt with UNAVAILABLE and gives the next one a fresh
  // channel.
  absl::Duration connect_timeout = absl::InfiniteDuration();
  // How long sent data may go unacknowledged before the connection is taken for dead
  // (TCP_USER_TIMEOUT, which gRPC sets from its keepalive timeout).
  absl::Duration silent_link_timeout = absl::Seconds(2);
  Backoff::Options backoff;
  // TLS files and the bearer token; plaintext unless configured.
  ClientSecurity security = [] {
    ClientSecurity plaintext;
    plaintext.insecure = true;
    return plaintext;
  }();
};

struct PullResult {
  bool updated = false;  // False: the caller already held this version; `out` untouched.
  uint64_t version = 0;
  uint64_t incarnation = 0;
};

class PsClient {
 public:
  explicit PsClient(PsClientOptions options);
  // For tests: a client over an existing channel, which it keeps (connect_timeout waits, but no
  // fresh channel replaces it).
  PsClient(PsClientOptions options, std::shared_ptr<grpc::Channel> channel);
  ~PsClient();

  // Builds the client's channel from options.security. Errors: the credentials' (a missing TLS
  // file, TLS neither given nor waived with insecure).
  static absl::StatusOr<std::unique_ptr<PsClient>> Create(PsClientOptions options);

  // Errors: FAILED_PRECONDITION on a model mismatch (naming both fingerprints), UNAVAILABLE after
  // retry_for.
  absl::StatusOr<v1::JoinResponse> Join();

  // Pushes `count` values computed on `base_version` of `base_incarnation` (0: unknown, not
  // checked), chunked and encoded per options, as this session's next push. A policy rejection
  // (STALE, AHEAD, BASE_NOT_IN_LINEAGE, an older server's WRONG_INCARNATION, SUPERSEDED) is an OK
  // result with accepted=false; malformed input is an error status.
  absl::StatusOr<PushAnswer> Push(const float* values, size_t count, uint64_t base_version,
                                  uint32_t minibatch_count, uint64_t base_incarnation = 0);

  // Fetches `network`'s weights into `out` unless (have_version, have_incarnation) is already
  // current. A stream cut short is retried whole; `out` is written only with one complete version.
  absl::StatusOr<PullResult> Pull(uint64_t have_version, uint64_t have_incarnation,
                                  v1::Network network, std::vector<float>* out);

  // What a push followed by a pull brought: the push's answer, and the pull's weights once the push
  // was answered (absent otherwise).
  struct PushPull {
    absl::StatusOr<PushAnswer> pushed = absl::UnknownError("not pushed");
    std::optional<absl::StatusOr<PullResult>> pulled;
  };
  // Push, then Pull of `network` into `out`, as the two calls would, but with the pull's request
  // sent right behind the push's last chunk: it names the push, and the server answers it once the
  // push is decided (docs/protocol.md, "A pull that follows its push"), so the answer and the
  // weights come back without a round trip between them. A followed pull that fails is made again
  // on its own (with Pull's retries); a push that gets no answer cancels it.
  PushPull PushThenPull(const float* values, size_t count, uint64_t base_version,
                        uint32_t minibatch_count, uint64_t base_incarnation, uint64_t have_version,
                        uint64_t have_incarnation, v1::Network network, std::vector<float>* out);

  absl::StatusOr<v1::StatusResponse> Status();

  // The newest push got no answer and has not been resent successfully since.
  bool has_pending_push() const { return pending_.has_value(); }
  // Sends the pending push again, same session and sequence. An answer (also an error status other
  // than UNAVAILABLE or DEADLINE_EXCEEDED) ends it; otherwise it stays pending. Errors:
  // FAILED_PRECONDITION when none is pending.
  absl::StatusOr<PushAnswer> ResendPendingPush();

  const PsClientOptions& options() const { return options_; }
  // The fingerprint Join and Push send; set once the model is known.
  void set_model_fingerprint(std::string fingerprint) {
    options_.model_fingerprint = std::move(fingerprint);
  }
  // The shard Join names; set once the model is known.
  void set_shard(uint32_t num_shards, uint32_t shard_index, std::string map_digest) {
    options_.num_shards = num_shards;
    options_.shard_index = shard_index;
    options_.shard_map_digest = std::move(map_digest);
  }
  uint64_t push_session() const { return push_session_; }
  // The sequence number the next Push will carry.
  uint64_t next_sequence() const { return pushes_ + 1; }

 private:
  // A channel with what is made on it. gRPC's method handles belong to their channel, so a fresh
  // channel comes with its own.
  struct Connection {
    explicit Connection(std::shared_ptr<grpc::Channel> channel);
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<v1::ParameterServer::Stub> stub;
    grpc::internal::RpcMethod
        pull_method;  // The two tensor streams, with the chunk types of tensor_chunk.h.
    grpc::internal::RpcMethod push_method;
  };

  PsClient(PsClientOptions options, std::shared_ptr<grpc::ChannelCredentials> credentials,
           std::shared_ptr<grpc::Channel> channel);

  template <typename Call>
  absl::Status WithRetries(const char* what, Call call);
  // With connect_timeout set: OK once the channel is connected; otherwise UNAVAILABLE saying why. A
  // channel that is neither connected nor idle (failed, or stuck connecting since an earlier
  // attempt) is replaced by a fresh one first; one still connecting stays beside it until either
  // connects.
  absl::Status Connect();

  struct PendingPush {
    std::vector<float> values;
    uint64_t base_version = 0;
    uint32_t minibatch_count = 0;
    uint64_t base_incarnation = 0;
    uint64_t sequence = 0;
  };
  // A pull sent right behind a push's last chunk, on the push's first attempt.
  struct FollowingPull {
    v1::PullRequest request;
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientReader<IncomingChunk<v1::WeightChunk>>> reader;
  };
  absl::StatusOr<PushAnswer> NextPush(const float* values, size_t count, uint64_t base_version,
                                      uint32_t minibatch_count, uint64_t base_incarnation,
                                      FollowingPull* follow);
  absl::StatusOr<PushAnswer> SendPush(const float* values, size_t count, uint64_t base_version,
                                      uint32_t minibatch_count, uint64_t base_incarnation,
                                      uint64_t sequence, FollowingPull* follow = nullptr);
  v1::PullRequest PullRequestFor(uint64_t have_version, uint64_t have_incarnation,
                                 v1::Network network) const;
  // Reads one pull stream into pull_buffer_ and `result`; ends the call.
  absl::Status ReadPull(grpc::ClientContext& context,
                        grpc::ClientReader<IncomingChunk<v1::WeightChunk>>& reader,
                        PullResult* result);

  PsClientOptions options_;
  // What fresh channels are made with; null for a client over a given channel.
  const std::shared_ptr<grpc::ChannelCredentials> credentials_;
  std::unique_ptr<Connection> connection_;
  // A channel Connect() replaced while it was still connecting, kept in case it gets there first.
  std::unique_ptr<Connection> previous_;
  std::vector<float> pull_buffer_;
  const uint64_t push_session_;
  uint64_t pushes_ = 0;  // Sequence of the newest push.
  std::optional<PendingPush> pending_;
};

}  // namespace convoy::agent

#endif  // CONVOY_AGENT_CLIENT_PS_CLIENT_H_
