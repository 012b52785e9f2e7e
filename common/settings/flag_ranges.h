// Range checks of numeric command-line flags, made once at start-up before a binary creates any
// file, socket or directory. Each binary lists its numeric flags in one table:
//
//   if (!FlagsInRange("convoy_train", {IntRange("agents", absl::GetFlag(FLAGS_agents), 1, 256),
//                                      RealRange("gamma", absl::GetFlag(FLAGS_gamma), 0, 1)})) {
//     return kExitUsage;
//   }
//
// No LibTorch and no gRPC here: every binary links it.
#ifndef CONVOY_COMMON_SETTINGS_FLAG_RANGES_H_
#define CONVOY_COMMON_SETTINGS_FLAG_RANGES_H_

#include <cstdint>
#include <limits>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

namespace convoy {

// The exit code of a binary started with a flag out of its range (as for an unknown flag).
inline constexpr int kExitUsage = 2;

// Upper bounds meaning "no upper bound", printed as "inf".
inline constexpr int64_t kNoIntMax = std::numeric_limits<int64_t>::max();
inline constexpr uint64_t kNoUintMax = std::numeric_limits<uint64_t>::max();
inline constexpr double kNoRealMax = std::numeric_limits<double>::infinity();

// Which ends of a real interval belong to it: [min, max], (min, max], [min, max) or (min, max).
enum class Ends { kClosed, kOpenMin, kOpenMax, kOpen };

// One flag's value and whether it lies in its range, with both spelled out for the message.
struct FlagRange {
  std::string name;   // Without the dashes.
  std::string value;  // As the message prints it.
  std::string range;  // "[1, 256]", "(0, inf)".
  bool in_range = false;
};

FlagRange IntRange(absl::string_view name, int64_t value, int64_t min, int64_t max);
FlagRange UintRange(absl::string_view name, uint64_t value, uint64_t min, uint64_t max);
// NaN is never in range.
FlagRange RealRange(absl::string_view name, double value, double min, double max,
                    Ends ends = Ends::kClosed);

// A duration flag ("1s", "500ms"); printed as absl::FormatDuration does, an infinite max as "inf".
FlagRange DurationRange(absl::string_view name, absl::Duration value, absl::Duration min,
                        absl::Duration max = absl::InfiniteDuration(), Ends ends = Ends::kClosed);

// OK when every flag is in range; else INVALID_ARGUMENT naming each flag out of range, its allowed
// range and its value ("--agents must be in [1, 256], got 0"), one per line.
absl::Status CheckFlagRanges(absl::Span<const FlagRange> ranges);

// CheckFlagRanges, printing "<program>: <message>" to stderr when a flag is out of range. Returns
// whether all are in range.
bool FlagsInRange(absl::string_view program, absl::Span<const FlagRange> ranges);

}  // namespace convoy

#endif  // CONVOY_COMMON_SETTINGS_FLAG_RANGES_H_
