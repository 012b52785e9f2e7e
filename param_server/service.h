// ParameterServerService: the gRPC edge of the parameter server. Translates wire messages to the
// core's calls and absl::Status to grpc::Status, once, here.
//
// It serves convoy.v1.ParameterServer as the generated service would, with the same method names and the
// same wire format, but registers its own handlers so the two tensor streams skip protobuf's copies:
// PullWeights writes chunks whose data slices refer to the immutable snapshot (common/tensor_chunk.h),
// and PushGradients decodes each chunk's data from the received slices straight into the push.
#ifndef CONVOY_PARAM_SERVER_SERVICE_H_
#define CONVOY_PARAM_SERVER_SERVICE_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include <grpcpp/impl/service_type.h>
#include <grpcpp/support/sync_stream.h>

#include <array>

#include "common/periodic_task.h"
#include "common/tensor_chunk.h"
#include "convoy/v1/parameter_server.pb.h"
#include "param_server/parameter_server.h"

namespace convoy {

// Thread-safe; every handler may run concurrently with every other.
class ParameterServerService final : public grpc::Service {
 public:
  // Every call must carry `auth_token` as a bearer token (an empty token accepts every call). A
  // push stream that sends no chunk for `stream_idle_timeout` (zero: never) is cancelled, so a
  // stalled client cannot hold a handler thread and a model-sized buffer for good.
  ParameterServerService(ParameterServer* server, std::string auth_token,
                         absl::Duration stream_idle_timeout = absl::ZeroDuration());
  ~ParameterServerService() override;
  ParameterServerService(const ParameterServerService&) = delete;
  ParameterServerService& operator=(const ParameterServerService&) = delete;

  // From now on pushes are refused with UNAVAILABLE (SHUTTING_DOWN); pushes already being applied
  // finish.
  void StopAcceptingPushes() { draining_.store(true); }

  // For tests of what a client sees when a push's reply is lost: called after each push was applied or
  // rejected by policy; a non-OK status it returns is sent instead of the PushResponse (as a connection
  // that drops after the apply would look to the client). Set before pushes arrive.
  using AfterApplyHook = std::function<grpc::Status(const PushOutcome&)>;
  void SetAfterApplyHookForTesting(AfterApplyHook hook) {
    absl::MutexLock lock(&hook_mu_);
    has_hook_.store(static_cast<bool>(hook));
    after_apply_ = std::move(hook);
  }

  grpc::Status Join(grpc::ServerContext* context, const v1::JoinRequest* request,
                    v1::JoinResponse* response);
  grpc::Status PullWeights(grpc::ServerContext* context, const v1::PullRequest* request,
                           grpc::ServerWriter<OutgoingChunk<v1::WeightChunk>>* writer);
  grpc::Status PushGradients(grpc::ServerContext* context,
                             grpc::ServerReader<IncomingChunk<v1::GradientChunk>>* reader,
                             v1::PushResponse* response);
  grpc::Status GetStatus(grpc::ServerContext* context, const v1::StatusRequest* request,
                         v1::StatusResponse* response);

 private:
  // UNAUTHENTICATED (and counted) unless the call carries the token.
  grpc::Status Authorize(const grpc::ServerContext& context);

  struct StreamState {
    absl::Time last_chunk;
    bool timed_out = false;  // Cancelled by the watchdog.
  };
  friend class PushStreamWatch;

  // Cancels the push streams idle for longer than stream_idle_timeout_; run by watchdog_.
  void CancelIdleStreams() ABSL_LOCKS_EXCLUDED(streams_mu_);

  // "/convoy.v1.ParameterServer/Join" and the others; gRPC keeps pointers to them.
  std::array<std::string, 4> method_names_;
  ParameterServer* server_;
  const std::string auth_token_;
  const absl::Duration stream_idle_timeout_;
  std::atomic<bool> draining_{false};
  std::atomic<bool> has_hook_{false};  // Pushes take hook_mu_ only when a hook is set.
  absl::Mutex hook_mu_;
  AfterApplyHook after_apply_ ABSL_GUARDED_BY(hook_mu_);
  // Model-sized push buffers to reuse, so a push neither allocates nor zeroes 4 bytes per parameter.
  std::vector<float> TakePushBuffer() ABSL_LOCKS_EXCLUDED(buffers_mu_);
  void ReturnPushBuffer(std::vector<float> buffer) ABSL_LOCKS_EXCLUDED(buffers_mu_);
  absl::Mutex buffers_mu_;
  std::vector<std::vector<float>> free_push_buffers_ ABSL_GUARDED_BY(buffers_mu_);

  absl::Mutex streams_mu_;
  absl::flat_hash_map<grpc::ServerContext*, StreamState> streams_ ABSL_GUARDED_BY(streams_mu_);
  // Runs every min(1 s, stream_idle_timeout / 4) until destroyed; null without a timeout.
  std::unique_ptr<PeriodicTask> watchdog_;
};

}  // namespace convoy

#endif  // CONVOY_PARAM_SERVER_SERVICE_H_
