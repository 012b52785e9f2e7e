// ParameterServerService::PullReactor: one PullWeights call. Part of the service's
// implementation: only service.cc and pull_reactor.cc include this header.
#ifndef CONVOY_PARAM_SERVER_SERVICE_PULL_REACTOR_H_
#define CONVOY_PARAM_SERVER_SERVICE_PULL_REACTOR_H_

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/server_callback.h>
#include <grpcpp/support/status.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/wire/tensor_encoding.h"
#include "convoy/v1/parameter_server.pb.h"
#include "param_server/service/pull_cache.h"
#include "param_server/service/service.h"

namespace convoy::ps {

// Once the push it follows is decided (if it names one), and once admitted (at most
// ServiceOptions::concurrent_pulls write at once), writes the newest version's serialized chunks
// (pull_cache.h) one after another. Deletes itself once gRPC is done with the call (OnDone).
class ParameterServerService::PullReactor final
    : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  PullReactor(ParameterServerService* service, grpc::CallbackServerContext* context,
              const v1::PullRequest* request);

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  // Once the push it follows is decided (at once for a pull that follows none): the newest
  // weights, or that the caller holds them, or its turn to be sent.
  void Proceed();
  // The caller holds `snapshot` already: a few bytes, answered at once, without a turn.
  void AnswerNotNewer(const WeightSnapshot& snapshot);
  // Waits for its turn to be sent, or is refused when too many wait.
  void Admit();
  // Its turn: the newest snapshot now (a pull that waited gets the weights of when it is sent).
  void Start();
  // Writes the next chunk; the last goes out with the status (no OnWriteDone follows it), counted
  // first, so that a client that has its answer sees the pull counted.
  void WriteNext();
  void FinishOnce(const grpc::Status& status);

  ParameterServerService* const service_;
  grpc::CallbackServerContext* const context_;
  std::string agent_id_;
  uint64_t request_bytes_ = 0;
  v1::Network network_ = v1::NETWORK_ONLINE;
  TensorEncoding encoding_ = TensorEncoding::kFp32;
  uint64_t bytes_out_ = 0;
  grpc::ByteBuffer single_;  // The not-newer answer.
  // Set when admitted (before any write), read in OnDone, which follows every reaction.
  bool admitted_ = false;
  std::shared_ptr<const SerializedPull> pull_;
  size_t next_ = 0;
  uint64_t have_version_ = 0;
  uint64_t have_incarnation_ = 0;
  // What the admission, the push it follows and a cancellation may change from other threads.
  absl::Mutex mu_;
  uint64_t wait_ticket_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t follow_ticket_ ABSL_GUARDED_BY(mu_) = 0;  // Waiting for its push under this id.
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace convoy::ps

#endif  // CONVOY_PARAM_SERVER_SERVICE_PULL_REACTOR_H_
