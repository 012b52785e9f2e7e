#include "common/support/progress_record.h"

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
#include "common/support/log_record.h"
#include "common/support/status_macros.h"

namespace convoy {
namespace {

constexpr absl::string_view kPrefix = "PROGRESS ";

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
  } else if (key == "wall_s") {
    read = ReadNumber(key, value, &record->wall_s);
  } else if (key == "cpu_sampler") {
    read = ReadNumber(key, value, &record->time.sampler_cpu);
  } else if (key == "cpu_process") {
    read = ReadNumber(key, value, &record->time.process_cpu);
  } else if (key == "wait_s") {
    read = ReadNumber(key, value, &record->time[AgentPhase::kWait]);
  } else if (absl::StartsWith(key, "cpu_")) {
    for (int p = 0; p < kAgentPhases; ++p) {
      const AgentPhase phase = static_cast<AgentPhase>(p);
      if (phase != AgentPhase::kWait && key.substr(4) == AgentPhaseKey(phase)) {
        CONVOY_RETURN_IF_ERROR(ReadNumber(key, value, &record->time[phase]));
        return true;
      }
    }
    return false;
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
  return LogRecord("progress", "PROGRESS")
      .Add("agent", r.agent)
      .Add("episodes", r.episodes)
      .Add("env_steps", r.env_steps)
      .Add("train_steps", r.train_steps)
      .Add("avg_return", absl::StrFormat("%.3f", r.avg_return))
      .Add("env_sps", absl::StrFormat("%.1f", r.env_sps))
      .Add("train_sps", absl::StrFormat("%.2f", r.train_sps))
      .Add("epsilon", absl::StrFormat("%.3f", r.epsilon))
      .Add("loss", absl::StrFormat("%.5f", r.loss))
      .Add("version", r.version)
      .Add("connected", r.connected ? 1 : 0)
      .Add("wall_s", absl::StrFormat("%.2f", r.wall_s))
      .Add("cpu_env", absl::StrFormat("%.3f", r.time[AgentPhase::kEnvironment]))
      .Add("cpu_preprocess", absl::StrFormat("%.3f", r.time[AgentPhase::kPreprocess]))
      .Add("cpu_inference", absl::StrFormat("%.3f", r.time[AgentPhase::kInference]))
      .Add("cpu_replay", absl::StrFormat("%.3f", r.time[AgentPhase::kReplay]))
      .Add("cpu_train", absl::StrFormat("%.3f", r.time[AgentPhase::kTrain]))
      .Add("cpu_sync", absl::StrFormat("%.3f", r.time[AgentPhase::kSync]))
      .Add("wait_s", absl::StrFormat("%.3f", r.time[AgentPhase::kWait]))
      .Add("cpu_other", absl::StrFormat("%.3f", r.time[AgentPhase::kOther]))
      .Add("cpu_sampler", absl::StrFormat("%.3f", r.time.sampler_cpu))
      .Add("cpu_process", absl::StrFormat("%.3f", r.time.process_cpu))
      .Line();
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
  for (const LogRecordFormat::Key& key : FindLogRecordFormat("progress", "PROGRESS")->keys) {
    if (!key.optional && seen.find(key.name) == seen.end()) missing.push_back(key.name);
  }
  if (!missing.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("PROGRESS line lacks the field",
                                                   missing.size() == 1 ? " " : "s ",
                                                   absl::StrJoin(missing, ", "), ": '", line, "'"));
  }
  return record;
}

}  // namespace convoy
