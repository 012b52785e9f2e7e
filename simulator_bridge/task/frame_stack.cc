#include "simulator_bridge/task/frame_stack.h"

#include <cstring>

#include "glog/logging.h"

namespace convoy::sim {

FrameStack::FrameStack(size_t frame_size, int k) : frame_size_(frame_size), k_(k) {
  CHECK_GE(k, 1) << "a frame stack holds at least one frame";
  data_.assign(frame_size * static_cast<size_t>(k), 0);
}

void FrameStack::Reset(const uint8_t* frame) {
  for (int i = 0; i < k_; ++i) std::memcpy(data_.data() + i * frame_size_, frame, frame_size_);
}

void FrameStack::Push(const uint8_t* frame) { std::memcpy(PushSlot(), frame, frame_size_); }

uint8_t* FrameStack::PushSlot() {
  uint8_t* const newest = data_.data() + (k_ - 1) * frame_size_;
  std::memmove(data_.data(), data_.data() + frame_size_, (k_ - 1) * frame_size_);
  return newest;
}

void FrameStack::FillWithNewest() {
  const uint8_t* const newest = data_.data() + (k_ - 1) * frame_size_;
  for (int i = 0; i < k_ - 1; ++i) std::memcpy(data_.data() + i * frame_size_, newest, frame_size_);
}

}  // namespace convoy::sim
