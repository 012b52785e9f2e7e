#include "tests/support/subprocess.h"


#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/support/files.h"


namespace convoy::testing {

absl::StatusOr<std::string> WaitForFileLine(const std::string& path, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    std::ifstream in(path);
    std::string line;
    if (in && std::getline(in, line) && !line.empty()) return line;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return absl::NotFoundError(absl::StrCat("no ", path, " after ", absl::FormatDuration(timeout)));
}

bool WaitUntil(const std::function<bool()>& condition, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!condition()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(50));
  }
  return true;
}

std::string MakeTempDir(const std::string& prefix) {
  const char* base = std::getenv("TMPDIR");
  std::string pattern = absl::StrCat(base ? base : "/tmp", "/", prefix, "-XXXXXX");
  char* made = ::mkdtemp(pattern.data());
  return made ? std::string(made) : std::string();
}

std::string ReadWholeFile(const std::string& path) {
  return ReadFileToString(path).value_or("");
}

}  // namespace convoy::testing
