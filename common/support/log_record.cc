#include "common/support/log_record.h"

#include <glog/logging.h>

#include <algorithm>

#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/log_records.inc"  // kLogRecordsDeclaration: common/support/log_records.txt, generated.

namespace convoy {

absl::StatusOr<std::vector<LogRecordFormat>> ParseLogRecordFormats(absl::string_view declaration) {
  std::vector<LogRecordFormat> formats;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(declaration, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line.substr(0, line.find('#')));
    if (line.empty()) continue;
    const std::vector<absl::string_view> words =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (words.size() < 3) {
      return absl::InvalidArgumentError(absl::StrCat("log record declaration line ", line_number,
                                                     ": '", line, "' is not 'log kind key...'"));
    }
    LogRecordFormat format{std::string(words[0]), std::string(words[1]), {}};
    for (size_t i = 2; i < words.size(); ++i) {
      absl::string_view name = words[i];
      const bool optional = absl::ConsumeSuffix(&name, "?");
      const bool twice = std::any_of(format.keys.begin(), format.keys.end(),
                                     [&](const LogRecordFormat::Key& k) { return k.name == name; });
      if (name.empty() || twice) {
        return absl::InvalidArgumentError(absl::StrCat("log record declaration line ", line_number,
                                                       ": key '", words[i], "' is ",
                                                       twice ? "declared twice" : "empty"));
      }
      format.keys.push_back({std::string(name), optional});
    }
    for (const LogRecordFormat& other : formats) {
      if (other.log == format.log && other.kind == format.kind) {
        return absl::InvalidArgumentError(absl::StrCat("log record declaration line ", line_number,
                                                       ": ", format.log, " ", format.kind,
                                                       " is declared twice"));
      }
    }
    formats.push_back(std::move(format));
  }
  return formats;
}

const std::vector<LogRecordFormat>& LogRecordFormats() {
  static const std::vector<LogRecordFormat>* const formats = [] {
    absl::StatusOr<std::vector<LogRecordFormat>> parsed =
        ParseLogRecordFormats(kLogRecordsDeclaration);
    CHECK(parsed.ok()) << "common/support/log_records.txt: " << parsed.status();
    return new std::vector<LogRecordFormat>(*std::move(parsed));
  }();
  return *formats;
}

const LogRecordFormat* FindLogRecordFormat(absl::string_view log, absl::string_view kind) {
  for (const LogRecordFormat& format : LogRecordFormats()) {
    if (format.log == log && format.kind == kind) return &format;
  }
  return nullptr;
}

absl::Status CheckRecordKeys(const LogRecordFormat& format, const std::vector<std::string>& keys) {
  size_t declared = 0;
  for (const std::string& key : keys) {
    // Skip optional keys left out before this one.
    while (declared < format.keys.size() && format.keys[declared].name != key &&
           format.keys[declared].optional) {
      ++declared;
    }
    if (declared == format.keys.size() || format.keys[declared].name != key) {
      return absl::InvalidArgumentError(absl::StrCat(
          format.log, " ", format.kind, " record: key '", key, "' is not declared there",
          declared < format.keys.size()
              ? absl::StrCat(" (expected '", format.keys[declared].name, "')")
              : ""));
    }
    ++declared;
  }
  for (; declared < format.keys.size(); ++declared) {
    if (!format.keys[declared].optional) {
      return absl::InvalidArgumentError(absl::StrCat(format.log, " ", format.kind, " record: key '",
                                                     format.keys[declared].name, "' is missing"));
    }
  }
  return absl::OkStatus();
}

LogRecord::LogRecord(absl::string_view log, absl::string_view kind)
    : format_(FindLogRecordFormat(log, kind)), line_(kind) {
  CHECK(format_ != nullptr) << "common/support/log_records.txt declares no " << log << " record " << kind;
}

LogRecord& LogRecord::Add(absl::string_view key, const absl::AlphaNum& value) {
  keys_.emplace_back(key);
  absl::StrAppend(&line_, " ", key, "=", value);
  return *this;
}

std::string LogRecord::Line() const {
  const absl::Status keys = CheckRecordKeys(*format_, keys_);
  CHECK(keys.ok()) << keys << " (common/support/log_records.txt)";
  return line_;
}

}  // namespace convoy
