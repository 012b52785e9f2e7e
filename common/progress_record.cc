#include "common/progress_record.h"

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"

namespace convoy {
namespace {

constexpr absl::string_view kPrefix = "PROGRESS ";

// Every field, in the line's order.
constexpr absl::string_view kFields[] = {"agent",      "episodes", "env_steps", "train_steps",
                                         "avg_return", "env_sps",  "train_sps", "epsilon",
                                         "loss",       "version",  "connected"};

absl::Status Malformed(absl::string_view key, absl::string_view value, absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("PROGRESS field ", key, "='", value, "' is not ", what));
}

absl::Status ReadCount(absl::string_view key, absl::string_view value, uint64_t* out) {
  if (!absl::SimpleAtoi(value, out)) return Malformed(key, value, "a count");
  return absl::OkStatus();
}

absl::Status ReadNumber(absl::string_view key, absl::string_view value, double* out) {
  if (!absl::SimpleAtod(value, out)) return Malformed(key, value, "a number");
  return absl::OkStatus();
}

// Sets the field `key` of `record`; false when this version does not know the field.
absl::StatusOr<bool> ReadField(absl::string_view key, absl::string_view value,
                               ProgressRecord* record) {
  absl::Status read;
  if (key == "agent") {
    if (value.empty()) return Malformed(key, value, "an agent id");
    record->agent = std::string(value);
  } else if (key == "episodes") {
    read = ReadCount(key, value, &record->episodes);
  } else if (key == "env_steps") {
    read = ReadCount(key, value, &record->env_steps);
  } else if (key == "train_steps") {
    read = ReadCount(key, value, &record->train_steps);
  } else if (key == "avg_return") {
    read = ReadNumber(key, value, &record->avg_return);
  } else if (key == "env_sps") {
    read = ReadNumber(key, value, &record->env_sps);
  } else if (key == "train_sps") {
    read = ReadNumber(key, value, &record->train_sps);
  } else if (key == "epsilon") {
    read = ReadNumber(key, value, &record->epsilon);
  } else if (key == "loss") {
    read = ReadNumber(key, value, &record->loss);
  } else if (key == "version") {
    read = ReadCount(key, value, &record->version);
  } else if (key == "connected") {
    if (value != "0" && value != "1") return Malformed(key, value, "0 or 1");
    record->connected = value == "1";
  } else {
    return false;
  }
  CONVOY_RETURN_IF_ERROR(read);
  return true;
}

}  // namespace

std::string FormatProgress(const ProgressRecord& r) {
  return absl::StrFormat(
      "PROGRESS agent=%s episodes=%llu env_steps=%llu train_steps=%llu avg_return=%.3f "
      "env_sps=%.1f train_sps=%.2f epsilon=%.3f loss=%.5f version=%llu connected=%d",
      r.agent, static_cast<unsigned long long>(r.episodes),
      static_cast<unsigned long long>(r.env_steps), static_cast<unsigned long long>(r.train_steps),
      r.avg_return, r.env_sps, r.train_sps, r.epsilon, r.loss,
      static_cast<unsigned long long>(r.version), r.connected ? 1 : 0);
}

bool IsProgressLine(absl::string_view line) { return absl::StartsWith(line, kPrefix); }

absl::StatusOr<ProgressRecord> ParseProgress(absl::string_view line) {
  if (!IsProgressLine(line)) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a PROGRESS line (it starts \"", kPrefix, "\"): '", line, "'"));
  }
  ProgressRecord record;
  std::set<std::string, std::less<>> seen;
  for (absl::string_view field :
       absl::StrSplit(line.substr(kPrefix.size()), ' ', absl::SkipEmpty())) {
    const size_t equals = field.find('=');
    if (equals == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("PROGRESS field '", field, "' is not key=value"));
    }
    const absl::string_view key = field.substr(0, equals);
    CONVOY_ASSIGN_OR_RETURN(const bool known, ReadField(key, field.substr(equals + 1), &record));
    if (known) seen.insert(std::string(key));
  }
  std::vector<absl::string_view> missing;
  for (absl::string_view key : kFields) {
    if (seen.find(key) == seen.end()) missing.push_back(key);
  }
  if (!missing.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("PROGRESS line lacks the field",
                                                   missing.size() == 1 ? " " : "s ",
                                                   absl::StrJoin(missing, ", "), ": '", line, "'"));
  }
  return record;
}

}  // namespace convoy
