// The gradient `convoy_synthetic_agent --replayable` pushes as push (session, sequence): a function
// of those two numbers alone, so that a checker can recompute every push a server applied and
// replay a run. Each value is -1, 0 or +1 times 2^-10, so with plain SGD at a power-of-two learning
// rate lr * g is exact and each step one rounding of w - lr * g: a replay in version order must
// equal the server's weights bit for bit.
#ifndef CONVOY_AGENT_CLIENT_SYNTHETIC_GRADIENT_H_
#define CONVOY_AGENT_CLIENT_SYNTHETIC_GRADIENT_H_

#include <cstddef>
#include <cstdint>
#include <random>

namespace convoy::agent {

constexpr float kReplayableGradientStep = 1.0f / 1024.0f;

inline void ReplayableGradient(uint64_t session, uint64_t sequence, size_t n, float* out) {
  std::seed_seq seed{static_cast<uint32_t>(session), static_cast<uint32_t>(session >> 32),
                     static_cast<uint32_t>(sequence), static_cast<uint32_t>(sequence >> 32)};
  std::mt19937_64 rng(seed);  // Its output sequence is fixed by the standard.
  for (size_t i = 0; i < n; ++i) {
    out[i] = static_cast<float>(static_cast<int>(rng() % 3) - 1) * kReplayableGradientStep;
  }
}

}  // namespace convoy::agent

#endif  // CONVOY_AGENT_CLIENT_SYNTHETIC_GRADIENT_H_
