// SumTree: priorities of a fixed number of slots, with prefix-sum search, for proportional
// prioritized replay.
#ifndef CONVOY_AGENT_LEARNING_SUM_TREE_H_
#define CONVOY_AGENT_LEARNING_SUM_TREE_H_

#include <cstddef>
#include <vector>

namespace convoy::agent {

// A complete binary tree over `size` leaves whose inner nodes hold the sum of their children. Set
// and Find are O(log size); Total is O(1). Each Set recomputes the sums on its path from the
// children (no running deltas), so rounding errors never accumulate however many updates are made.
//
// Not thread-safe: the owner serialises access (ReplayMemory holds its mutex).
class SumTree {
 public:
  // All `size` leaves start at priority 0. `size` must be at least 1.
  explicit SumTree(size_t size);

  // Sets leaf `index` (< size()) to `priority` (finite, >= 0).
  void Set(size_t index, double priority);
  double Get(size_t index) const;
  double Total() const { return nodes_[1]; }

  // The leaf whose prefix-sum range [sum of leaves before it, that plus its priority) holds
  // `prefix_sum`. A value below 0 is taken as 0 and one at or above Total() gives the last leaf
  // with a positive priority, so the answer always has a positive priority when Total() > 0. With
  // Total() == 0 the answer is 0.
  size_t Find(double prefix_sum) const;

  size_t size() const { return size_; }
  // Bytes held by the tree, for memory accounting.
  size_t memory_bytes() const { return nodes_.capacity() * sizeof(double); }

 private:
  size_t size_;
  size_t leaves_;  // size_ rounded up to a power of two
  // 1-based heap layout: node i has children 2i and 2i+1; leaf j is node leaves_ + j.
  std::vector<double>
      nodes_;  // 1-based heap layout: node i has children 2i and 2i+1; leaves at leaves_ + index
};

}  // namespace convoy::agent

#endif  // CONVOY_AGENT_LEARNING_SUM_TREE_H_
