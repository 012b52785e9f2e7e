// Figures drawn from a CSV by bench/plot.py (matplotlib, Debian's python3-matplotlib): the programs
// that leave a figure beside their numbers (convoy_bench_learn's learning curves, the learning
// curve convoy_train leaves in its run directory) build plot.py's command here and run it the
// same way. Without matplotlib plot.py exits 3 and draws nothing; the numbers stand without the
// figure, so callers say so and go on.
//
// Header-only: convoy_train and the benchmarks both see common/, and this is a command line and one
// child process.
#ifndef CONVOY_COMMON_SUPPORT_LINE_PLOT_H_
#define CONVOY_COMMON_SUPPORT_LINE_PLOT_H_

#include <filesystem>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "common/support/child_process.h"

namespace convoy {

// The interpreter Debian's python3-matplotlib is installed for.
inline constexpr char kPlotPython[] = "/usr/bin/python3";
// plot.py's exit status when matplotlib is not installed.
inline constexpr int kPlotExitNoMatplotlib = 3;

// One figure: --y against each --x (a panel each), one line per series, reference series as
// horizontal lines. Columns are NAME or NAME=LABEL (plot.py's docstring).
struct LinePlot {
  std::string csv;
  std::string output;  // .png, .svg or .pdf.
  std::string series;  // The column naming each row's series; empty: all rows are one.
  std::string y;
  std::vector<std::string> x;
  std::vector<std::string> hlines;  // Series drawn as a dashed horizontal line at their mean y.
  // "LOW,HIGH": columns of an interval around y, shaded about each line (empty: none).
  std::string band;
  bool y_from_zero = false;
  std::string title;
};

// plot.py's command line: python, script, then the figure's arguments.
inline std::vector<std::string> LinePlotCommand(const std::string& python,
                                                const std::string& script, const LinePlot& plot) {
  std::vector<std::string> command = {python, script, plot.csv, "-o", plot.output};
  if (!plot.series.empty()) command.insert(command.end(), {"--series", plot.series});
  command.insert(command.end(), {"--y", plot.y});
  for (const std::string& x : plot.x) command.insert(command.end(), {"--x", x});
  for (const std::string& h : plot.hlines) command.insert(command.end(), {"--hline", h});
  if (!plot.band.empty()) command.insert(command.end(), {"--band", plot.band});
  if (plot.y_from_zero) command.push_back("--y_from_zero");
  if (!plot.title.empty()) command.insert(command.end(), {"--title", plot.title});
  return command;
}

// bench/plot.py of the source tree the running program was built from: `built_from` (the path the
// build compiled in, CONVOY_PLOT_SCRIPT) when it is there, else looked for in the program's directory
// and each directory above it (a tree moved with its build/). NOT_FOUND names where it looked.
inline absl::StatusOr<std::string> FindPlotScript(const std::string& built_from) {
  constexpr char kRelative[] = "bench/plot.py";
  std::error_code ignored;
  if (std::filesystem::is_regular_file(built_from, ignored)) return built_from;
  std::vector<std::string> tried = {built_from};
  std::filesystem::path dir = ExecutableDirectory();
  for (int depth = 0; depth < 6 && !dir.empty(); ++depth) {
    const std::filesystem::path script = dir / kRelative;
    std::error_code error;
    if (std::filesystem::is_regular_file(script, error)) return script.string();
    tried.push_back(dir.string());
    if (dir == dir.parent_path()) break;
    dir = dir.parent_path();
  }
  return absl::NotFoundError(absl::StrCat("no ", kRelative, " in ", absl::StrJoin(tried, ", ")));
}

// Runs plot.py's `command` and waits up to `timeout`. Its messages go to `log_path` (empty: this
// process's stderr). OK when drawn; FAILED_PRECONDITION when matplotlib is not installed;
// DEADLINE_EXCEEDED, or UNKNOWN with its exit status, when it did not draw for another reason;
// INTERNAL when it could not be started.
inline absl::Status DrawLinePlot(const std::vector<std::string>& command,
                                 const std::string& log_path = "",
                                 absl::Duration timeout = absl::Minutes(5)) {
  ChildProcess::Options options;
  options.log_path = log_path;
  absl::StatusOr<ChildProcess> child = ChildProcess::Start(command, options);
  if (!child.ok()) return child.status();
  const std::optional<int> code = child->Wait(timeout);
  if (!code.has_value()) {
    return absl::DeadlineExceededError(
        absl::StrCat("the plot script ran ", absl::FormatDuration(timeout)));
  }
  if (*code == kPlotExitNoMatplotlib) {
    return absl::FailedPreconditionError("matplotlib is not installed");
  }
  if (*code != 0) return absl::UnknownError(absl::StrCat("the plot script exited ", *code));
  return absl::OkStatus();
}

}  // namespace convoy

#endif  // CONVOY_COMMON_SUPPORT_LINE_PLOT_H_
