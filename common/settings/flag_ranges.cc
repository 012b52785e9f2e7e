#include "common/settings/flag_ranges.h"

#include <cmath>
#include <cstdio>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace convoy {
namespace {

template <typename T>
std::string Bound(T bound, T unbounded) {
  return bound == unbounded ? std::string("inf") : absl::StrCat(bound);
}

}  // namespace

FlagRange IntRange(absl::string_view name, int64_t value, int64_t min, int64_t max) {
  return {std::string(name), absl::StrCat(value),
          absl::StrCat("[", min, ", ", Bound(max, kNoIntMax), max == kNoIntMax ? ")" : "]"),
          value >= min && value <= max};
}

FlagRange UintRange(absl::string_view name, uint64_t value, uint64_t min, uint64_t max) {
  return {std::string(name), absl::StrCat(value),
          absl::StrCat("[", min, ", ", Bound(max, kNoUintMax), max == kNoUintMax ? ")" : "]"),
          value >= min && value <= max};
}

FlagRange RealRange(absl::string_view name, double value, double min, double max, Ends ends) {
  const bool open_min = ends == Ends::kOpenMin || ends == Ends::kOpen;
  // An infinite end is never reached, so it is printed open.
  const bool open_max = ends == Ends::kOpenMax || ends == Ends::kOpen || std::isinf(max);
  const bool above = open_min ? value > min : value >= min;
  const bool below = open_max ? value < max : value <= max;
  return {std::string(name), absl::StrCat(value),
          absl::StrCat(open_min ? "(" : "[", min, ", ", std::isinf(max) ? "inf" : absl::StrCat(max),
                       open_max ? ")" : "]"),
          above && below};  // Both false for NaN.
}

FlagRange DurationRange(absl::string_view name, absl::Duration value, absl::Duration min,
                        absl::Duration max, Ends ends) {
  const bool open_min = ends == Ends::kOpenMin || ends == Ends::kOpen;
  const bool infinite = max == absl::InfiniteDuration();
  const bool open_max = ends == Ends::kOpenMax || ends == Ends::kOpen || infinite;
  const bool above = open_min ? value > min : value >= min;
  const bool below = open_max ? value < max : value <= max;
  return {std::string(name), absl::FormatDuration(value),
          absl::StrCat(open_min ? "(" : "[", absl::FormatDuration(min), ", ",
                       infinite ? "inf" : absl::FormatDuration(max), open_max ? ")" : "]"),
          above && below};
}

absl::Status CheckFlagRanges(absl::Span<const FlagRange> ranges) {
  std::vector<std::string> errors;
  for (const FlagRange& r : ranges) {
    if (!r.in_range)
      errors.push_back(absl::StrCat("--", r.name, " must be in ", r.range, ", got ", r.value));
  }
  if (errors.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrJoin(errors, "\n"));
}

bool FlagsInRange(absl::string_view program, absl::Span<const FlagRange> ranges) {
  const absl::Status checked = CheckFlagRanges(ranges);
  if (checked.ok()) return true;
  for (absl::string_view line : absl::StrSplit(checked.message(), '\n')) {
    std::fprintf(stderr, "%.*s: %.*s\n", static_cast<int>(program.size()), program.data(),
                 static_cast<int>(line.size()), line.data());
  }
  return false;
}

}  // namespace convoy
