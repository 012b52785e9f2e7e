#include "agent/learning/sum_tree.h"

#include "tests/catch.h"

namespace convoy::agent {
namespace {

TEST_CASE("A new sum tree has zero total and zero leaves", "[sum_tree]") {
  SumTree tree(5);
  CHECK(tree.size() == 5);
  CHECK(tree.Total() == 0.0);
  for (size_t i = 0; i < 5; ++i) CHECK(tree.Get(i) == 0.0);
  CHECK(tree.Find(0.0) == 0);
}

TEST_CASE("Set stores a priority and the total is the sum of the leaves", "[sum_tree]") {
  SumTree tree(6);
  tree.Set(0, 1.0);
  tree.Set(3, 2.5);
  tree.Set(5, 0.5);
  CHECK(tree.Get(0) == 1.0);
  CHECK(tree.Get(3) == 2.5);
  CHECK(tree.Get(5) == 0.5);
  CHECK(tree.Get(1) == 0.0);
  CHECK(tree.Total() == Approx(4.0));
}

TEST_CASE("Setting a leaf again replaces its contribution to the total", "[sum_tree]") {
  SumTree tree(4);
  tree.Set(2, 3.0);
  tree.Set(2, 1.0);
  CHECK(tree.Total() == Approx(1.0));
  tree.Set(2, 0.0);
  CHECK(tree.Total() == 0.0);
}

TEST_CASE("Find returns the leaf whose prefix sum range holds the value", "[sum_tree]") {
  // Leaves 1, 2, 3, 4 own [0, 1), [1, 3), [3, 6), [6, 10).
  SumTree tree(4);
  for (size_t i = 0; i < 4; ++i) tree.Set(i, static_cast<double>(i + 1));
  CHECK(tree.Find(0.0) == 0);
  CHECK(tree.Find(0.999) == 0);
  CHECK(tree.Find(1.0) == 1);
  CHECK(tree.Find(2.999) == 1);
  CHECK(tree.Find(3.0) == 2);
  CHECK(tree.Find(5.5) == 2);
  CHECK(tree.Find(6.0) == 3);
  CHECK(tree.Find(9.999) == 3);
}

TEST_CASE("Find skips leaves with zero priority", "[sum_tree]") {
  SumTree tree(7);
  tree.Set(2, 1.0);
  tree.Set(5, 1.0);
  CHECK(tree.Find(0.0) == 2);
  CHECK(tree.Find(0.5) == 2);
  CHECK(tree.Find(1.0) == 5);
  CHECK(tree.Find(1.5) == 5);
}

TEST_CASE("Find clamps values outside the total to a leaf with positive priority", "[sum_tree]") {
  SumTree tree(5);
  tree.Set(1, 2.0);
  tree.Set(3, 1.0);
  CHECK(tree.Find(-1.0) == 1);
  CHECK(tree.Find(3.0) == 3);
  CHECK(tree.Find(100.0) == 3);
}

TEST_CASE("A tree whose size is not a power of two covers every leaf", "[sum_tree]") {
  for (size_t size : {1, 3, 5, 6, 7, 9, 100}) {
    SumTree tree(size);
    for (size_t i = 0; i < size; ++i) tree.Set(i, 1.0);
    CHECK(tree.Total() == Approx(static_cast<double>(size)));
    for (size_t i = 0; i < size; ++i) CHECK(tree.Find(i + 0.5) == i);
  }
}

TEST_CASE("Many updates leave the total equal to the sum of the leaves", "[sum_tree]") {
  SumTree tree(1000);
  double expected[1000] = {};
  for (int round = 0; round < 20; ++round) {
    for (size_t i = 0; i < 1000; ++i) {
      const double p = 0.001 * static_cast<double>((i * 7919 + round * 104729) % 1000);
      tree.Set(i, p);
      expected[i] = p;
    }
  }
  double sum = 0.0;
  for (double p : expected) sum += p;
  CHECK(tree.Total() == Approx(sum).epsilon(1e-12));
}

}  // namespace
}  // namespace convoy::agent
