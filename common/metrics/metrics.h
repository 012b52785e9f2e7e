// Training metrics: CSV tables under a log directory, mirrored as TensorBoard scalars. The running
// statistics the agents and the server report (moving average, event rate) are in common/support/rates.h.
#ifndef CONVOY_COMMON_METRICS_METRICS_H_
#define CONVOY_COMMON_METRICS_METRICS_H_

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/metrics/tfevents.h"
#include "common/support/rates.h"

namespace convoy {

// A log directory holding one CSV file per table (<name>.csv, a fixed header line then one row per
// Append) and one TensorBoard event file in which each row's values appear as scalars tagged
// "<name>/<column>" at the step given by the table's step column (the step column itself is not
// repeated as a scalar).
//
// Thread-safe: Append from any thread; rows of one table keep the order of their Append calls.
// Durability: each accepted row is flushed to the operating system before Append returns, so a
// crash of the process loses nothing that was accepted.
class MetricsLog {
 public:
  // Creates `dir` (and its parents) if missing, and the event file in it.
  // Errors: INVALID_ARGUMENT for an empty dir, or the I/O error.
  static absl::StatusOr<std::unique_ptr<MetricsLog>> Open(const std::string& dir);

  ~MetricsLog();

  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  // Opens <dir>/<name>.csv with `columns` as its header. `name` is a file stem of letters, digits,
  // '_',
  // '-' and '.'; columns are non-empty, distinct, and free of commas, quotes and line breaks;
  // `step_column` is one of them. A file that already exists with the same header is appended to,
  // so a restarted process continues its tables. Errors: INVALID_ARGUMENT for a bad name, column or
  // step column; ALREADY_EXISTS if the table was declared before; FAILED_PRECONDITION if the file
  // exists with a different header; or the I/O error.
  absl::Status DeclareTable(const std::string& name, std::vector<std::string> columns,
                            const std::string& step_column);

  // Appends one row, values in the declared column order. Values are written in their shortest form
  // that reads back as the same double ("nan" and "inf" as such); TensorBoard keeps them as floats.
  // The step is the step column's value rounded to an integer. Errors: NOT_FOUND for an undeclared
  // table; INVALID_ARGUMENT if values.size() differs from the column count or the step value is not
  // finite; or the I/O error (the CSV row may then be written without its scalars).
  absl::Status Append(const std::string& name, const std::vector<double>& values,
                      absl::Time wall = absl::Now());

  const std::string& dir() const { return dir_; }
  // The path of the table's CSV file (whether or not it is declared).
  std::string TablePath(const std::string& name) const;
  // The path of the TensorBoard event file.
  const std::string& event_file_path() const { return events_->path(); }

 private:
  struct Table {
    std::vector<std::string> columns;
    size_t step_index = 0;
    std::FILE* file = nullptr;
  };

  MetricsLog(std::string dir, std::unique_ptr<EventFileWriter> events)
      : dir_(std::move(dir)), events_(std::move(events)) {}

  const std::string dir_;
  // EventFileWriter is thread-safe on its own; mu_ also keeps the two outputs in the same row
  // order.
  const std::unique_ptr<EventFileWriter> events_;
  absl::Mutex mu_;
  std::map<std::string, Table> tables_ ABSL_GUARDED_BY(mu_);
};


}  // namespace convoy

#endif  // CONVOY_COMMON_METRICS_METRICS_H_
