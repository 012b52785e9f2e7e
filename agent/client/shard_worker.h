// ShardWorker: a thread of one parameter server's own, for the length of a run, on which every
// call to that server's transport is made. The acting loop never waits on the network, and a
// server that is slow or silent holds up only its own calls: a push on a silent link waits out its
// deadline, a rejoin attempt its own, while the other shards' exchanges go on. One job runs at a
// time, so the transport keeps its single-threaded contract.
#ifndef CONVOY_AGENT_CLIENT_SHARD_WORKER_H_
#define CONVOY_AGENT_CLIENT_SHARD_WORKER_H_

#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace convoy::agent {

class ShardWorker {
 public:
  ShardWorker();
  // Lets the job in flight end (its calls have deadlines), then stops the thread.
  ~ShardWorker();
  ShardWorker(const ShardWorker&) = delete;
  ShardWorker& operator=(const ShardWorker&) = delete;

  // Begins `job` on the worker's thread; none may be in flight. What the job writes is the caller's
  // to read once busy() is false (or Wait returned true).
  void Start(std::function<void()> job);
  // A job was started and has not finished.
  bool busy() const;
  // Waits until no job is in flight, at most until `deadline`; true when none is.
  bool Wait(absl::Time deadline = absl::InfiniteFuture());

 private:
  void Loop();

  mutable absl::Mutex mu_;
  std::function<void()> job_ ABSL_GUARDED_BY(mu_);
  bool busy_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // Last: starts once the rest is made.
};

}  // namespace convoy::agent

#endif  // CONVOY_AGENT_CLIENT_SHARD_WORKER_H_
