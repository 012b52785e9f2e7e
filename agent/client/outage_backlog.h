// OutageBacklog: what a parameter server (or one shard of it) is owed from the updates it missed
// while it was away, paid as one catch-up push when it is back.
//
// Pushes carry a mean gradient or a weight change, as the push mode says, so missed pushes add up
// in the way the server would have applied them: mean gradients into their minibatch-weighted mean,
// weight changes into their sum. The agent keeps one for the whole server while it learns out of
// step; a sharded session keeps one per shard that is away.
// Thread-compatible.
#ifndef CONVOY_AGENT_CLIENT_OUTAGE_BACKLOG_H_
#define CONVOY_AGENT_CLIENT_OUTAGE_BACKLOG_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "agent/client/push_mode.h"

namespace convoy::agent {

class OutageBacklog {
 public:
  explicit OutageBacklog(PushMode push) : push_(push) {}

  // Adds an update learned over `minibatches` minibatches: a mean gradient (weighted by its
  // minibatches) or a weight change (added as it is). Every update added must have the same size.
  void Add(absl::Span<const float> update, uint64_t minibatches);

  // Nothing is owed.
  bool empty() const { return minibatches_ == 0; }
  uint64_t minibatches() const { return minibatches_; }

  // Writes the one update that pays what is owed into *update (the mean gradient, or the summed
  // weight change; empty when nothing is owed), empties the backlog and returns the minibatches the
  // update stands for.
  uint64_t Take(std::vector<float>* update);

 private:
  const PushMode push_;
  std::vector<float> sum_;  // Weighted by minibatches for gradients.
  uint64_t minibatches_ = 0;
};

}  // namespace convoy::agent

#endif  // CONVOY_AGENT_CLIENT_OUTAGE_BACKLOG_H_
