// An agent's PROGRESS line: what convoy_agent --machine_progress prints on stdout every report, and
// what the launchers (LocalCluster, so convoy_train and convoy_bench_learn) read back. One line:
//
//   PROGRESS agent=agent-0 episodes=12 env_steps=3400 train_steps=800 avg_return=41.250
//       env_sps=95.0 train_sps=22.50 epsilon=0.412 loss=0.01234 version=790 connected=1
//       wall_s=60.0 cpu_env=12.1 cpu_preprocess=0.9 cpu_inference=4.2 cpu_replay=1.8 cpu_train=26.0
//       cpu_sync=1.0 wait_s=0.4 cpu_other=1.1 cpu_sampler=3.5 cpu_process=52.0
//
// (on one line), every field present, in this order, separated by single spaces:
// common/support/log_records.txt declares it (progress PROGRESS).
#ifndef CONVOY_COMMON_SUPPORT_PROGRESS_RECORD_H_
#define CONVOY_COMMON_SUPPORT_PROGRESS_RECORD_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/support/time_split.h"

namespace convoy {

struct ProgressRecord {
  std::string agent;  // The agent's id; no spaces.
  uint64_t episodes = 0;
  uint64_t env_steps = 0;
  uint64_t train_steps = 0;
  double avg_return = 0;  // Over the agent's recent episodes.
  double env_sps = 0;     // Environment steps per second over the latest interval.
  double train_sps = 0;   // Minibatches per second over the latest interval.
  double epsilon = 0;
  double loss = 0;
  uint64_t version = 0;    // The parameter server's version the agent last saw.
  bool connected = false;  // Connected and in step with the server (or training alone).
  // Where its time went since it started (common/support/time_split.h), cumulative seconds; an older
  // agent's line without them reads as zeros.
  double wall_s = 0;
  TimeSplit time;
};

// The line, without its newline.
std::string FormatProgress(const ProgressRecord& record);

// Whether `line` is a PROGRESS line at all (an agent's stdout may carry other lines).
bool IsProgressLine(absl::string_view line);

// The record of a PROGRESS line. Fields may come in any order; a field this version does not know
// is skipped, so that a newer agent's line still reads. Errors: INVALID_ARGUMENT naming the field
// when one is missing, is not key=value, or its value is not of its type (a count, a number, 0/1).
absl::StatusOr<ProgressRecord> ParseProgress(absl::string_view line);

}  // namespace convoy

#endif  // CONVOY_COMMON_SUPPORT_PROGRESS_RECORD_H_
