#include "common/settings/flag_ranges.h"

#include <cmath>
#include <limits>

#include "tests/catch.h"

namespace convoy {
namespace {

TEST_CASE("A flag out of its range is named with the range and the value", "[flag_ranges]") {
  const absl::Status s = CheckFlagRanges({IntRange("agents", 0, 1, 256)});
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK(s.message() == "--agents must be in [1, 256], got 0");
}

TEST_CASE("Flags in range pass, at both ends of a closed range", "[flag_ranges]") {
  CHECK(CheckFlagRanges({IntRange("port", 0, 0, 65535), IntRange("port", 65535, 0, 65535),
                         UintRange("batch_size", 1, 1, 65536), RealRange("gamma", 0, 0, 1),
                         RealRange("gamma", 1, 0, 1)})
            .ok());
  CHECK(CheckFlagRanges({}).ok());
}

TEST_CASE("Open ends exclude their bound", "[flag_ranges]") {
  CHECK(CheckFlagRanges({RealRange("learning_rate", 0, 0, kNoRealMax, Ends::kOpenMin)}).message() ==
        "--learning_rate must be in (0, inf), got 0");
  CHECK(CheckFlagRanges({RealRange("learning_rate", 1e-9, 0, kNoRealMax, Ends::kOpenMin)}).ok());
  CHECK(CheckFlagRanges({RealRange("beta1", 1, 0, 1, Ends::kOpenMax)}).message() ==
        "--beta1 must be in [0, 1), got 1");
  CHECK(!CheckFlagRanges({RealRange("fov", 180, 0, 180, Ends::kOpen)}).ok());
  CHECK(!CheckFlagRanges({RealRange("fov", 0, 0, 180, Ends::kOpen)}).ok());
  CHECK(CheckFlagRanges({RealRange("fov", 90, 0, 180, Ends::kOpen)}).ok());
}

TEST_CASE("NaN and infinity are out of a real range", "[flag_ranges]") {
  CHECK(!CheckFlagRanges({RealRange("gamma", std::nan(""), 0, 1)}).ok());
  CHECK(!CheckFlagRanges(
             {RealRange("minutes", std::numeric_limits<double>::infinity(), 0, kNoRealMax)})
             .ok());
}

TEST_CASE("Unbounded integer ranges print inf", "[flag_ranges]") {
  CHECK(CheckFlagRanges({UintRange("replay_memory_size", 0, 1, kNoUintMax)}).message() ==
        "--replay_memory_size must be in [1, inf), got 0");
  CHECK(CheckFlagRanges({IntRange("max_staleness", -2, -1, kNoIntMax)}).message() ==
        "--max_staleness must be in [-1, inf), got -2");
  CHECK(CheckFlagRanges({UintRange("replay_memory_size", kNoUintMax, 1, kNoUintMax)}).ok());
}

TEST_CASE("Every flag out of range is reported, one per line", "[flag_ranges]") {
  const absl::Status s = CheckFlagRanges(
      {IntRange("agents", 0, 1, 256), RealRange("gamma", 0.5, 0, 1), RealRange("gamma", 2, 0, 1)});
  CHECK(s.message() == "--agents must be in [1, 256], got 0\n--gamma must be in [0, 1], got 2");
  CHECK(!FlagsInRange("test", {IntRange("agents", 0, 1, 256)}));
  CHECK(FlagsInRange("test", {IntRange("agents", 1, 1, 256)}));
}

}  // namespace
}  // namespace convoy
