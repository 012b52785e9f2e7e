// Where LibTorch 1.13 (Debian 12) and 2.x (Debian 13's 2.6; the CUDA builds users bring, 2.4
// to 2.11) differ, the one place that knows. Code elsewhere calls these and never tests
// TORCH_VERSION_* itself.
//
// The differences met so far:
//   - CUDA autocast: `at::autocast::set_enabled(bool)` is 1.x's; 2.4 deprecated it for
//     `set_autocast_enabled(device_type, bool)`, which 1.13 lacks.
#ifndef CONVOY_COMMON_TORCH_COMPAT_H_
#define CONVOY_COMMON_TORCH_COMPAT_H_

#include <ATen/autocast_mode.h>
#include <torch/version.h>

namespace convoy::torch_compat {

// Turns autocast for CUDA tensors on or off for this thread.
inline void SetCudaAutocastEnabled(bool enabled) {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
  at::autocast::set_autocast_enabled(at::kCUDA, enabled);
#else
  at::autocast::set_enabled(enabled);
#endif
}

}  // namespace convoy::torch_compat

#endif  // CONVOY_COMMON_TORCH_COMPAT_H_
