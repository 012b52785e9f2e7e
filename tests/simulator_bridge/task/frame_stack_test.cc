#include "simulator_bridge/task/frame_stack.h"

#include <vector>

#include "tests/catch.h"

namespace convoy::sim {
namespace {

std::vector<uint8_t> Contents(const FrameStack& stack) {
  return std::vector<uint8_t>(stack.data(), stack.data() + stack.size());
}

TEST_CASE("A frame stack keeps the newest frames oldest first", "[frame_stack]") {
  FrameStack stack(2, 3);
  const uint8_t a[2] = {1, 1}, b[2] = {2, 2}, c[2] = {3, 3};
  stack.Reset(a);
  CHECK(std::vector<uint8_t>(stack.data(), stack.data() + 6) ==
        std::vector<uint8_t>{1, 1, 1, 1, 1, 1});
  stack.Push(b);
  stack.Push(c);
  CHECK(std::vector<uint8_t>(stack.data(), stack.data() + 6) ==
        std::vector<uint8_t>{1, 1, 2, 2, 3, 3});
}

TEST_CASE("a frame stack starts zeroed and drops its oldest frame on a push", "[frame_stack]") {
  FrameStack stack(2, 3);
  CHECK(stack.size() == 6);
  CHECK(stack.frame_size() == 2);
  CHECK(stack.k() == 3);
  CHECK(Contents(stack) == std::vector<uint8_t>(6, 0));
  const uint8_t a[2] = {1, 2}, b[2] = {3, 4}, c[2] = {5, 6}, d[2] = {7, 8};
  stack.Reset(a);
  stack.Push(b);
  stack.Push(c);
  stack.Push(d);
  CHECK(Contents(stack) == std::vector<uint8_t>{3, 4, 5, 6, 7, 8});
  stack.Reset(d);
  CHECK(Contents(stack) == std::vector<uint8_t>{7, 8, 7, 8, 7, 8});
}

TEST_CASE("writing a frame in place is a push, and filling with it a reset", "[frame_stack]") {
  FrameStack stack(2, 3);
  const uint8_t a[2] = {1, 2};
  stack.Reset(a);
  uint8_t* slot = stack.PushSlot();
  CHECK(slot == stack.data() + 4);
  CHECK(slot[0] == 1);  // still the previous newest frame
  slot[0] = 9;
  slot[1] = 8;
  CHECK(Contents(stack) == std::vector<uint8_t>{1, 2, 1, 2, 9, 8});
  slot = stack.PushSlot();
  slot[0] = 5;
  slot[1] = 4;
  CHECK(Contents(stack) == std::vector<uint8_t>{1, 2, 9, 8, 5, 4});
  stack.FillWithNewest();
  CHECK(Contents(stack) == std::vector<uint8_t>{5, 4, 5, 4, 5, 4});
}

TEST_CASE("a stack of one frame is the newest frame", "[frame_stack]") {
  FrameStack stack(3, 1);
  const uint8_t a[3] = {1, 2, 3}, b[3] = {4, 5, 6};
  stack.Reset(a);
  CHECK(Contents(stack) == std::vector<uint8_t>{1, 2, 3});
  stack.Push(b);
  CHECK(Contents(stack) == std::vector<uint8_t>{4, 5, 6});
  uint8_t* slot = stack.PushSlot();
  CHECK(slot == stack.data());
  slot[2] = 0;
  stack.FillWithNewest();
  CHECK(Contents(stack) == std::vector<uint8_t>{4, 5, 0});
}

}  // namespace
}  // namespace convoy::sim
