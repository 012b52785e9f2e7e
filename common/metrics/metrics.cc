#include "common/metrics/metrics.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/support/files.h"
#include "common/support/status_macros.h"
#include "glog/logging.h"

namespace convoy {
namespace {

bool IsValidTableName(const std::string& name) {
  if (name.empty() || name == "." || name == "..") return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-' || c == '.';
  });
}

bool IsValidColumn(const std::string& column) {
  return !column.empty() && column.find_first_of(",\"\r\n") == std::string::npos;
}

// The shortest decimal form that reads back as the same double.
void AppendNumber(double value, std::string* out) {
  if (std::isnan(value)) {
    out->append("nan");
    return;
  }
  if (std::isinf(value)) {
    out->append(value > 0 ? "inf" : "-inf");
    return;
  }
  char buffer[32];
  const std::to_chars_result result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  out->append(buffer, result.ptr);
}

// The first line of `path`; *non_empty is false when the file is missing or empty.
std::string FirstLine(const std::string& path, bool* non_empty) {
  std::ifstream in(path);
  std::string line;
  *non_empty = static_cast<bool>(in) && static_cast<bool>(std::getline(in, line));
  return line;
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsLog>> MetricsLog::Open(const std::string& dir) {
  if (dir.empty()) return absl::InvalidArgumentError("MetricsLog: empty log directory");
  CONVOY_ASSIGN_OR_RETURN(std::unique_ptr<EventFileWriter> events, EventFileWriter::Create(dir));
  return std::unique_ptr<MetricsLog>(new MetricsLog(dir, std::move(events)));
}

MetricsLog::~MetricsLog() {
  absl::MutexLock lock(&mu_);
  for (auto& [name, table] : tables_) {
    if (std::fclose(table.file) != 0) {
      LOG(ERROR) << "closing " << TablePath(name) << ": " << std::strerror(errno);
    }
  }
}

std::string MetricsLog::TablePath(const std::string& name) const {
  return absl::StrCat(dir_, "/", name, ".csv");
}

absl::Status MetricsLog::DeclareTable(const std::string& name, std::vector<std::string> columns,
                                      const std::string& step_column) {
  if (!IsValidTableName(name)) {
    return absl::InvalidArgumentError(absl::StrCat("bad metrics table name \"", name,
                                                   "\": use letters, digits, '_', '-' and '.'"));
  }
  if (columns.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("metrics table ", name, " has no columns"));
  }
  std::set<std::string> seen;
  for (const std::string& column : columns) {
    if (!IsValidColumn(column)) {
      return absl::InvalidArgumentError(
          absl::StrCat("metrics table ", name, ": bad column name \"", column, "\""));
    }
    if (!seen.insert(column).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("metrics table ", name, ": column ", column, " appears twice"));
    }
  }
  const auto step = std::find(columns.begin(), columns.end(), step_column);
  if (step == columns.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics table ", name, ": step column ", step_column, " is not a column"));
  }

  absl::MutexLock lock(&mu_);
  if (tables_.count(name) > 0) {
    return absl::AlreadyExistsError(absl::StrCat("metrics table ", name, " is already declared"));
  }
  const std::string path = TablePath(name);
  const std::string header = absl::StrJoin(columns, ",");
  bool non_empty = false;
  const std::string existing = FirstLine(path, &non_empty);
  if (non_empty && existing != header) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " exists with header \"", existing, "\", not \"", header, "\""));
  }
  std::FILE* file = std::fopen(path.c_str(), "ab");
  if (file == nullptr) return ErrnoError(errno, "cannot open", path);
  if (!non_empty) {
    const std::string line = absl::StrCat(header, "\n");
    if (std::fwrite(line.data(), 1, line.size(), file) != line.size() || std::fflush(file) != 0) {
      const int error = errno;
      std::fclose(file);
      return ErrnoError(error, "cannot write", path);
    }
  }
  Table& table = tables_[name];
  table.columns = std::move(columns);
  table.step_index = static_cast<size_t>(step - table.columns.begin());
  table.file = file;
  return absl::OkStatus();
}

absl::Status MetricsLog::Append(const std::string& name, const std::vector<double>& values,
                                absl::Time wall) {
  absl::MutexLock lock(&mu_);
  const auto it = tables_.find(name);
  if (it == tables_.end()) {
    return absl::NotFoundError(absl::StrCat("metrics table ", name, " is not declared"));
  }
  const Table& table = it->second;
  if (values.size() != table.columns.size()) {
    return absl::InvalidArgumentError(absl::StrCat("metrics table ", name, " has ",
                                                   table.columns.size(), " columns, got ",
                                                   values.size(), " values"));
  }
  const double step_value = values[table.step_index];
  if (!std::isfinite(step_value)) {
    return absl::InvalidArgumentError(absl::StrCat("metrics table ", name, ": step column ",
                                                   table.columns[table.step_index],
                                                   " is not finite"));
  }

  std::string line;
  std::vector<std::pair<std::string, double>> scalars;
  scalars.reserve(values.size() - 1);
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) line.push_back(',');
    AppendNumber(values[i], &line);
    if (i != table.step_index)
      scalars.emplace_back(absl::StrCat(name, "/", table.columns[i]), values[i]);
  }
  line.push_back('\n');
  if (std::fwrite(line.data(), 1, line.size(), table.file) != line.size() ||
      std::fflush(table.file) != 0) {
    return ErrnoError(errno, "cannot write", TablePath(name));
  }
  if (scalars.empty()) return absl::OkStatus();
  absl::Status status = events_->AddScalars(std::llround(step_value), scalars, wall);
  if (!status.ok()) return status;
  return events_->Flush();
}

}  // namespace convoy
