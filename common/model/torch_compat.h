// Where LibTorch 1.13 (Debian 12) and 2.x (Debian 13's 2.6; the CUDA builds users bring, 2.4
// to 2.11) differ, the one place that knows. Code elsewhere calls these and never tests
// TORCH_VERSION_* itself.
//
// The differences met so far:
//   - CUDA autocast: `at::autocast::set_enabled(bool)` is 1.x's; 2.4 deprecated it for
//     `set_autocast_enabled(device_type, bool)`, which 1.13 lacks.
//   - Logging: a LibTorch built with glog (Debian 12's 1.13) uses glog's LOG; one built without it
//     (Debian 13's 2.6) defines a LOG of its own in c10/util/Logging.h, which replaces glog's in
//     every translation unit that includes LibTorch and drops INFO at its default level. Including
//     this header after LibTorch's gives such a translation unit glog's LOG back, so convoy's log
//     lines are glog's everywhere.
#ifndef CONVOY_COMMON_MODEL_TORCH_COMPAT_H_
#define CONVOY_COMMON_MODEL_TORCH_COMPAT_H_

#include <ATen/autocast_mode.h>
#include <c10/macros/Macros.h>
#include <c10/util/Logging.h>
#include <glog/logging.h>
#include <torch/version.h>

#ifndef C10_USE_GLOG
#undef LOG
#define LOG(severity) COMPACT_GOOGLE_LOG_##severity.stream()  // glog's own definition.
#endif

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

#endif  // CONVOY_COMMON_MODEL_TORCH_COMPAT_H_
