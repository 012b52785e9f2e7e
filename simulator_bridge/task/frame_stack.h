// FrameStack: the newest k frames of an episode stacked along C, oldest first, in one contiguous
// buffer: the observation DrivingEnv hands out with frame_stack > 1, and the model input the
// agent's evaluation builds from preprocessed frames. After Reset every slot holds the episode's
// first frame.
//
// ReplayMemory (agent/learning/replay_memory.h) does not use it: it stores every frame once in a
// ring shared by all transitions and gathers a transition's stack at sample time by index, which is
// a different problem (stacks of many past time steps, each clipped at its own episode's start).
//
// Allocates only when constructed. Not thread-safe.
#ifndef CONVOY_SIMULATOR_BRIDGE_TASK_FRAME_STACK_H_
#define CONVOY_SIMULATOR_BRIDGE_TASK_FRAME_STACK_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace convoy::sim {

class FrameStack {
 public:
  // k >= 1 frames of frame_size bytes each, all zero until Reset.
  FrameStack(size_t frame_size, int k);

  // Starts an episode: every slot becomes a copy of `frame` (frame_size bytes).
  void Reset(const uint8_t* frame);
  // Drops the oldest frame and appends `frame` as the newest.
  void Push(const uint8_t* frame);

  // In-place variants, for callers that produce a frame straight into the stack. PushSlot drops the
  // oldest frame and returns the newest slot (frame_size bytes, still holding the previous newest
  // frame) for the caller to overwrite; FillWithNewest then copies the newest frame into every
  // other slot, which after PushSlot and a write is Reset of that frame.
  uint8_t* PushSlot();
  void FillWithNewest();

  // The stack, size() = k * frame_size bytes, oldest frame first.
  const uint8_t* data() const { return data_.data(); }
  size_t size() const { return data_.size(); }
  size_t frame_size() const { return frame_size_; }
  int k() const { return k_; }

 private:
  size_t frame_size_;
  int k_;
  std::vector<uint8_t> data_;
};

}  // namespace convoy::sim

#endif  // CONVOY_SIMULATOR_BRIDGE_TASK_FRAME_STACK_H_
