// SessionWorker: the agent's exchanges with the parameter server, on a thread of their own.
//
// The acting/learning loop must not wait on the network: a push in flight when a link goes silent
// waits out its deadline, and a rejoin attempt waits out its own. So the loop hands each exchange
// (push then pull, a rejoin, the push of what it learned out of step then a pull) to this worker
// and goes on acting; it polls for the answer between steps. One exchange is in flight at a time,
// in the order given, so the session keeps its single-threaded contract: after Start() the worker's
// thread makes every call on the session, and the loop only reads the snapshot an Exchange carries
// back.
#ifndef CONVOY_AGENT_SESSION_WORKER_H_
#define CONVOY_AGENT_SESSION_WORKER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "agent/ps_session.h"

namespace convoy {

// One exchange: what the loop asks for, and what came back.
struct Exchange {
  enum class Kind {
    kSync,     // Push `values` (unless minibatches is 0); when it was answered, pull.
    kCatchUp,  // Rejoining or out of step: push `values` (unless minibatches is 0); when it was
               // answered, Reconnected() and pull whatever version is held.
    kRejoin,   // Rejoin(pace).
  };
  Kind kind = Kind::kSync;
  std::vector<float> values;
  uint32_t minibatches = 0;
  RejoinPace pace = RejoinPace::kPaced;

  // Set when a push was sent / a pull made / a rejoin tried.
  std::optional<absl::StatusOr<PushAnswer>> pushed;
  std::optional<absl::StatusOr<PullUpdate>> pulled;
  std::optional<absl::StatusOr<double>> rejoined;
  // Buffers the pull writes (the loop lends its own, so nothing is allocated per exchange).
  std::vector<float> online, target;
  absl::Duration push_time, pull_time;

  // The session when the exchange ended.
  bool connected = false;
  bool has_pending_push = false;
  uint64_t version = 0;
  uint64_t incarnation = 0;
};

class SessionWorker {
 public:
  // `session` must outlive the worker; from now on only the worker's thread calls it.
  explicit SessionWorker(ParameterServerSession* session);
  // Lets the exchange in flight end (its calls have deadlines), then stops the thread.
  ~SessionWorker();
  SessionWorker(const SessionWorker&) = delete;
  SessionWorker& operator=(const SessionWorker&) = delete;

  // Begins `exchange`; none may be in flight or unclaimed.
  void Start(std::unique_ptr<Exchange> exchange);
  // An exchange was started and not yet claimed with Take/Wait.
  bool busy() const;
  // When the exchange in flight (or finished, unclaimed) began.
  absl::Time started() const;
  // The finished exchange, or null while it is still in flight (or none was started).
  std::unique_ptr<Exchange> TakeFinished();
  // Waits for the exchange in flight to finish, until `deadline`, and returns it; null when none
  // was started or it is still in flight at the deadline.
  std::unique_ptr<Exchange> WaitFinished(absl::Time deadline = absl::InfiniteFuture());

 private:
  void Loop();
  void Perform(Exchange* exchange);

  ParameterServerSession* const session_;
  mutable absl::Mutex mu_;
  std::unique_ptr<Exchange> pending_ ABSL_GUARDED_BY(mu_);   // Given, not yet begun.
  std::unique_ptr<Exchange> finished_ ABSL_GUARDED_BY(mu_);  // Done, not yet claimed.
  bool busy_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time started_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace convoy

#endif  // CONVOY_AGENT_SESSION_WORKER_H_
