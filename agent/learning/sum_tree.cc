#include "agent/learning/sum_tree.h"

#include <glog/logging.h>

#include <cmath>

namespace convoy::agent {

SumTree::SumTree(size_t size) : size_(size), leaves_(1) {
  CHECK_GE(size, 1u) << "a sum tree needs at least one leaf";
  while (leaves_ < size_) leaves_ *= 2;
  nodes_.assign(2 * leaves_, 0.0);
}

void SumTree::Set(size_t index, double priority) {
  CHECK_LT(index, size_);
  DCHECK(std::isfinite(priority) && priority >= 0.0) << priority;
  size_t node = leaves_ + index;
  nodes_[node] = priority;
  for (node /= 2; node >= 1; node /= 2) {
    nodes_[node] = nodes_[2 * node] + nodes_[2 * node + 1];
  }
}

double SumTree::Get(size_t index) const {
  CHECK_LT(index, size_);
  return nodes_[leaves_ + index];
}

size_t SumTree::Find(double prefix_sum) const {
  if (!(prefix_sum > 0.0)) prefix_sum = 0.0;  // also catches NaN
  size_t node = 1;
  while (node < leaves_) {
    const double left = nodes_[2 * node];
    const double right = nodes_[2 * node + 1];
    if (prefix_sum < left || right <= 0.0) {
      // Going left when the right side is empty keeps the answer on a positive leaf even when
      // rounding has pushed prefix_sum past the true total.
      node = 2 * node;
    } else {
      prefix_sum -= left;
      node = 2 * node + 1;
    }
  }
  return node - leaves_;
}

}  // namespace convoy::agent
