// LogRecord: the key=value records convoy writes for checking a run afterwards (convoy_ps's apply
// log, an agent's push log, its PROGRESS lines). Their formats are declared once, in
// common/support/log_records.txt: each log's record kinds and their keys, in order. The build compiles that
// file in; the Python checkers (tests/cluster/log_records.py) read the same file. A record is one
// line: its kind, then key=value fields separated by single spaces.
#ifndef CONVOY_COMMON_SUPPORT_LOG_RECORD_H_
#define CONVOY_COMMON_SUPPORT_LOG_RECORD_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace convoy {

// One record kind as declared.
struct LogRecordFormat {
  std::string log;   // "apply_log", "push_log", "progress".
  std::string kind;  // The line's first word.
  struct Key {
    std::string name;
    bool optional = false;  // Declared with a trailing '?'.
  };
  std::vector<Key> keys;  // In the order they are written.
};

// The declaration of `log`'s records of `kind`; null when there is none.
const LogRecordFormat* FindLogRecordFormat(absl::string_view log, absl::string_view kind);

// Every declared record, in the declaration's order.
const std::vector<LogRecordFormat>& LogRecordFormats();

// Parses a declaration (the format of common/support/log_records.txt: "log kind key key? ..." per line, '#'
// comments). Errors: INVALID_ARGUMENT naming the line for a line without keys, a key declared twice
// in one record, or a record declared twice.
absl::StatusOr<std::vector<LogRecordFormat>> ParseLogRecordFormats(absl::string_view declaration);

// `keys`, in the order given, against `format`: OK when they are its keys in its order, optional
// ones possibly left out. Errors: INVALID_ARGUMENT naming the first key out of place, or one
// missing.
absl::Status CheckRecordKeys(const LogRecordFormat& format, const std::vector<std::string>& keys);

// Builds one record's line, checked against its declaration: Line() fails a CHECK when the keys
// given are not the declared ones in order (a writer out of date with common/support/log_records.txt; every
// writer's tests write each of its records).
class LogRecord {
 public:
  // CHECK-fails when `log` declares no `kind`.
  LogRecord(absl::string_view log, absl::string_view kind);
  LogRecord& Add(absl::string_view key, const absl::AlphaNum& value);
  // The line, without a newline.
  std::string Line() const;

 private:
  const LogRecordFormat* format_;
  std::vector<std::string> keys_;
  std::string line_;
};

}  // namespace convoy

#endif  // CONVOY_COMMON_SUPPORT_LOG_RECORD_H_
