#include "agent/client/outage_backlog.h"

#include <glog/logging.h>

namespace convoy::agent {

void OutageBacklog::Add(absl::Span<const float> update, uint64_t minibatches) {
  if (sum_.empty()) sum_.assign(update.size(), 0.0f);
  CHECK_EQ(sum_.size(), update.size()) << "updates of different sizes in one backlog";
  const float weight = push_ == PushMode::kDeltas ? 1.0f : static_cast<float>(minibatches);
  for (size_t i = 0; i < update.size(); ++i) sum_[i] += weight * update[i];
  minibatches_ += minibatches;
}

uint64_t OutageBacklog::Take(std::vector<float>* update) {
  const uint64_t minibatches = minibatches_;
  update->resize(sum_.size());
  // Mean gradients are divided by their minibatches once, here, as a scale (what the agent always
  // did).
  const float scale = push_ == PushMode::kGradients && minibatches > 0
                          ? 1.0f / static_cast<float>(minibatches)
                          : 1.0f;
  for (size_t i = 0; i < sum_.size(); ++i) (*update)[i] = sum_[i] * scale;
  sum_.clear();
  minibatches_ = 0;
  return minibatches;
}

}  // namespace convoy::agent
