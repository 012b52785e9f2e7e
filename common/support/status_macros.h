// Early returns on error, as Reverb's platform/status_macros.h has them: one line instead of the
// hand-written `if (!s.ok()) return s;` that every fallible call otherwise needs.
//
//   CONVOY_RETURN_IF_ERROR(WriteManifest(dir));          // Returns the status when it is not OK.
//   CONVOY_ASSIGN_OR_RETURN(auto file, OpenFile(path));  // Declares `file`, or returns the error.
//   CONVOY_ASSIGN_OR_RETURN(existing, OpenFile(path));   // Assigns to an existing variable.
//
// Both work in any function that returns absl::Status or absl::StatusOr<T>. The error is returned
// as it is: its code and message are those of the call that failed.
#ifndef CONVOY_COMMON_SUPPORT_STATUS_MACROS_H_
#define CONVOY_COMMON_SUPPORT_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define CONVOY_STATUS_MACROS_CONCAT_INNER(x, y) x##y
#define CONVOY_STATUS_MACROS_CONCAT(x, y) CONVOY_STATUS_MACROS_CONCAT_INNER(x, y)

#define CONVOY_RETURN_IF_ERROR(expr)                                              \
  do {                                                                            \
    if (::absl::Status convoy_status_macro_ = (expr); !convoy_status_macro_.ok()) \
      return convoy_status_macro_;                                                \
  } while (false)

#define CONVOY_ASSIGN_OR_RETURN(lhs, expr) \
  CONVOY_ASSIGN_OR_RETURN_IMPL(CONVOY_STATUS_MACROS_CONCAT(convoy_statusor_, __LINE__), lhs, expr)

#define CONVOY_ASSIGN_OR_RETURN_IMPL(statusor, lhs, expr)  \
  auto statusor = (expr);                                  \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = std::move(statusor).value()

#endif  // CONVOY_COMMON_SUPPORT_STATUS_MACROS_H_
