// ParameterServerService::PushReactor: one PushGradients call. Part of the service's
// implementation: only service.cc and push_reactor.cc include this header.
#ifndef CONVOY_PARAM_SERVER_SERVICE_PUSH_REACTOR_H_
#define CONVOY_PARAM_SERVER_SERVICE_PUSH_REACTOR_H_

#include <grpcpp/support/server_callback.h>
#include <grpcpp/support/status.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/wire/push_answer.h"
#include "common/wire/tensor_chunk.h"
#include "convoy/v1/parameter_server.pb.h"
#include "param_server/core/push_assembler.h"
#include "param_server/service/service.h"

namespace convoy::ps {

// Waits for a receive buffer, reads the stream into it chunk by chunk, hands the push to the core's
// apply worker and answers when the worker has decided it. It holds no thread while it waits.
// Deletes itself once gRPC is done with the call (OnDone).
class ParameterServerService::PushReactor final
    : public grpc::ServerReadReactor<IncomingChunk<v1::GradientChunk>> {
 public:
  PushReactor(ParameterServerService* service, grpc::CallbackServerContext* context,
              v1::PushResponse* response);

  void OnReadDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

  // The watchdog's verdict: no chunk for too long. Called under the service's streams lock, before
  // this reactor is unwatched, so the context is alive.
  void TimeOut();

 private:
  // With its buffer: starts reading, unless the call was cancelled while it waited.
  void Start(std::vector<float> buffer);
  // The stream ended (a half-close after the last chunk, or a broken stream): submits the push or
  // rejects it.
  void EndOfStream();
  void Answer(const PushAnswer& outcome);
  // A pull that follows this push may go now: it is decided, and when applied, the step's weights
  // are published. Before Finish, after which the reactor may be gone.
  void Decided();
  void Reject(v1::RejectReason reason, const absl::Status& status);
  void FinishOnce(const grpc::Status& status);

  ParameterServerService* const service_;
  grpc::CallbackServerContext* const context_;
  v1::PushResponse* const response_;
  // Touched by gRPC's reactions one at a time, and by the apply worker only after the last of them.
  std::optional<PushAssembler> assembler_;
  IncomingChunk<v1::GradientChunk> chunk_;
  uint64_t bytes_in_ = 0;
  // What the buffer pool, the watchdog and a cancellation may change from other threads.
  absl::Mutex mu_;
  uint64_t wait_ticket_ ABSL_GUARDED_BY(mu_) = 0;  // Waiting for a buffer under this id.
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool timed_out_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace convoy::ps

#endif  // CONVOY_PARAM_SERVER_SERVICE_PUSH_REACTOR_H_
