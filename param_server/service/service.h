// ParameterServerService: the gRPC edge of the parameter server. Translates wire messages to the
// core's calls and absl::Status to grpc::Status, once, here.
//
// It serves convoy.v1.ParameterServer as the generated service would, with the same method names
// and the same wire format, but registers its own handlers so the two tensor streams skip
// protobuf's copies: PullWeights writes chunks whose data slices refer to the immutable snapshot
// (common/wire/tensor_chunk.h), serialized once per version and shared by every puller of it
// (pull_cache.h), and PushGradients decodes each chunk's data from the received slices straight
// into a pooled buffer (push_buffer_pool.h).
//
// Every handler is gRPC's callback API (a reactor per call), so no thread is held per connected
// agent: a push waiting for a buffer, being received or waiting for the apply worker is state, not
// a blocked thread, and the number of agents a server takes is bounded by memory. Its bounds:
//   - push_buffers model-sized buffers (memory: push_buffers x parameters x 4 bytes), which bound
//     the pushes being received, queued for the apply worker or applied;
//   - max_waiting_pushes streams that wait, unread, for a buffer (HTTP/2 flow control holds their
//     agents back); one more is refused with RESOURCE_EXHAUSTED (SERVER_BUSY, counted) and the
//     trailing metadata grpc-retry-pushback-ms, which agents honour before they retry
//     (docs/protocol.md, "A busy server");
//   - concurrent_pulls pulls written at once, each of the newest version when its turn comes;
//     the others wait holding nothing (max_waiting_pulls, then RESOURCE_EXHAUSTED likewise).
#ifndef CONVOY_PARAM_SERVER_SERVICE_SERVICE_H_
#define CONVOY_PARAM_SERVER_SERVICE_SERVICE_H_

#include <grpcpp/impl/service_type.h>
#include <grpcpp/support/server_callback.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/support/periodic_task.h"
#include "common/wire/tensor_chunk.h"
#include "convoy/v1/parameter_server.pb.h"
#include "param_server/core/admission.h"
#include "param_server/core/parameter_server.h"
#include "param_server/core/push_buffer_pool.h"
#include "param_server/service/followed_pushes.h"
#include "param_server/service/pull_cache.h"

namespace convoy::ps {

struct ServiceOptions {
  // A push stream that sends no chunk for this long (zero: never) is cancelled and counted as a
  // rejection, so a stalled client cannot hold a push buffer for good.
  absl::Duration stream_idle_timeout = absl::Seconds(60);
  // Model-sized receive buffers; 0: 2 x the core's max_pushes_per_step + 4, enough to receive the
  // next batch while one is applied.
  uint32_t push_buffers = 0;
  // Push streams that may wait, unread, for a buffer; the next is refused (SERVER_BUSY).
  uint32_t max_waiting_pushes = 4096;
  // Pulls written at once; 0: as many as the default push buffers. The others wait their turn,
  // holding nothing but their request, so the weights in flight are bounded too.
  uint32_t concurrent_pulls = 0;
  // Pulls that may wait for their turn; the next is refused with RESOURCE_EXHAUSTED.
  uint32_t max_waiting_pulls = 4096;
  // Each stream's HTTP/2 receive window, fixed (0: gRPC's adaptive window, grown by BDP probing).
  // It bounds what a push waiting for a buffer has sent ahead (so the transport's memory is about
  // connections x this), and a single push's rate at window / round trip.
  uint32_t receive_window_bytes = 256 << 10;
  // The retry delay a SERVER_BUSY refusal asks for.
  absl::Duration busy_retry_after = absl::Milliseconds(250);
};

// The receive buffers `options` asks for, for a core whose steps combine `max_pushes_per_step`.
uint32_t PushBuffersFor(const ServiceOptions& options, uint32_t max_pushes_per_step);
// The pulls written at once that `options` asks for.
uint32_t ConcurrentPullsFor(const ServiceOptions& options, uint32_t max_pushes_per_step);

// Thread-safe; every handler may run concurrently with every other.
class ParameterServerService final : public grpc::Service {
 public:
  // Every call must carry `auth_token` as a bearer token (an empty token accepts every call).
  ParameterServerService(ParameterServer* server, std::string auth_token,
                         ServiceOptions options = {});
  ~ParameterServerService() override;
  ParameterServerService(const ParameterServerService&) = delete;
  ParameterServerService& operator=(const ParameterServerService&) = delete;

  // From now on pushes are refused with UNAVAILABLE (SHUTTING_DOWN); pushes already received are
  // applied and answered.
  void StopAcceptingPushes() { draining_.store(true); }

  // For tests of what a client sees when a push's reply is lost: called after each push was applied
  // or rejected by policy; a non-OK status it returns is sent instead of the PushResponse (as a
  // connection that drops after the apply would look to the client). Set before pushes arrive.
  using AfterApplyHook = std::function<grpc::Status(const PushAnswer&)>;
  void SetAfterApplyHookForTesting(AfterApplyHook hook) ABSL_LOCKS_EXCLUDED(hook_mu_) {
    absl::MutexLock lock(&hook_mu_);
    has_hook_.store(static_cast<bool>(hook));
    after_apply_ = std::move(hook);
  }

  // The core's status with the edge's admission figures (push buffers, waiting pushes).
  v1::StatusResponse Status() const;

 private:
  class PushReactor;  // push_reactor.h
  class PullReactor;  // pull_reactor.h
  friend class PushReactor;
  friend class PullReactor;

  grpc::ServerUnaryReactor* Join(grpc::CallbackServerContext* context,
                                 const v1::JoinRequest* request, v1::JoinResponse* response);
  grpc::ServerWriteReactor<grpc::ByteBuffer>* PullWeights(grpc::CallbackServerContext* context,
                                                          const v1::PullRequest* request);
  grpc::ServerReadReactor<IncomingChunk<v1::GradientChunk>>* PushGradients(
      grpc::CallbackServerContext* context, v1::PushResponse* response);
  grpc::ServerUnaryReactor* GetStatus(grpc::CallbackServerContext* context,
                                      const v1::StatusRequest* request,
                                      v1::StatusResponse* response);

  // UNAUTHENTICATED (and counted) unless the call carries the token.
  grpc::Status Authorize(const grpc::CallbackServerContext& context);
  // The hook's replacement for a push's answer; OK when there is none.
  grpc::Status AfterApply(const PushAnswer& outcome) ABSL_LOCKS_EXCLUDED(hook_mu_);

  // The idle-stream watchdog: push streams being read, and when each last delivered a chunk.
  void Watch(PushReactor* reactor) ABSL_LOCKS_EXCLUDED(streams_mu_);
  void Touch(PushReactor* reactor) ABSL_LOCKS_EXCLUDED(streams_mu_);
  void Unwatch(PushReactor* reactor) ABSL_LOCKS_EXCLUDED(streams_mu_);
  // Cancels the push streams idle for longer than stream_idle_timeout, and answers the pulls that
  // have waited as long for a push that never came; run by watchdog_.
  void CancelIdleStreams() ABSL_LOCKS_EXCLUDED(streams_mu_);

  // "/convoy.v1.ParameterServer/Join" and the others; gRPC keeps pointers to them.
  std::array<std::string, 4> method_names_;
  ParameterServer* server_;
  const std::string auth_token_;
  const ServiceOptions options_;
  std::atomic<bool> draining_{false};
  std::atomic<bool> has_hook_{false};  // Pushes take hook_mu_ only when a hook is set.
  absl::Mutex hook_mu_;
  AfterApplyHook after_apply_ ABSL_GUARDED_BY(hook_mu_);
  PushBufferPool buffers_;
  Admission pulls_;
  PullCache pull_cache_;
  FollowedPushes followed_;

  absl::Mutex streams_mu_;
  absl::flat_hash_map<PushReactor*, absl::Time> streams_ ABSL_GUARDED_BY(streams_mu_);
  // Runs every min(1 s, stream_idle_timeout / 4) until destroyed; null without a timeout.
  std::unique_ptr<PeriodicTask> watchdog_;
};

}  // namespace convoy::ps

#endif  // CONVOY_PARAM_SERVER_SERVICE_SERVICE_H_
