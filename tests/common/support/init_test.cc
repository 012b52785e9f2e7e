// InitProcess's huge pages for the heap (common/support/init.h, UseHugePagesInHeap): the helper process
// (init_helper.cc) is started through env(1) with the GLIBC_TUNABLES each case names, and reports
// what it runs with.
#include <unistd.h>

#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "common/support/child_process.h"
#include "tests/catch.h"
#include "tests/skip.h"

namespace convoy {
namespace {

struct Report {
  pid_t started = 0;  // The pid ChildProcess started.
  std::map<std::string, std::string> fields;
};

// Runs the helper under `env_args` (env(1)'s arguments before the program) with `args`.
Report RunHelper(const std::vector<std::string>& env_args, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"/usr/bin/env"};
  argv.insert(argv.end(), env_args.begin(), env_args.end());
  argv.push_back(CONVOY_INIT_HELPER);
  argv.insert(argv.end(), args.begin(), args.end());
  ChildProcess::Options options;
  options.pipe_stdout = true;
  absl::StatusOr<ChildProcess> child = ChildProcess::Start(argv, options);
  REQUIRE(child.ok());
  std::string out;
  char buffer[4096];
  for (ssize_t n; (n = ::read(child->stdout_fd(), buffer, sizeof(buffer))) > 0;)
    out.append(buffer, n);
  REQUIRE(child->Wait(absl::Seconds(60)) == std::optional<int>(0));
  Report report;
  report.started = child->pid();
  for (absl::string_view line : absl::StrSplit(out, '\n', absl::SkipEmpty())) {
    const std::pair<std::string, std::string> kv = absl::StrSplit(line, absl::MaxSplits('=', 1));
    report.fields[kv.first] = kv.second;
  }
  return report;
}

// The kernel's transparent huge page mode, "always [madvise] never" with the brackets on it.
std::string HugePageMode() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string mode;
  std::getline(in, mode);
  return mode;
}

// The environment that gives the helper convoy_ps's ProcessPolicy (huge pages in the heap).
constexpr const char* kServerPolicy = "CONVOY_INIT_HELPER_HUGE_PAGES=1";

TEST_CASE("convoy_ps's policy asks glibc for huge pages in its heap, starting once more to do so",
          "[init]") {
  const std::string mode = HugePageMode();
  if (mode.empty() || absl::StrContains(mode, "[never]")) {
    CONVOY_SKIP("this kernel gives no transparent huge pages (mode '" << mode << "')");
  }
  const Report report = RunHelper({"-u", "GLIBC_TUNABLES", kServerPolicy}, {"first", "second"});
  CHECK(report.fields.at("TUNABLES") == "glibc.malloc.hugetlb=1");
  // Started again in place: the same process, its arguments intact.
  CHECK(report.fields.at("PID") == std::to_string(report.started));
  CHECK(report.fields.at("ARGS") == "first,second");
  // glibc took the tunable: the heap it grew is advised for huge pages.
  CHECK(report.fields.at("HEAP_HUGE_ADVISED") == "1");
}

TEST_CASE("Tunables already set are kept, the huge-page one added after them", "[init]") {
  const std::string mode = HugePageMode();
  if (mode.empty() || absl::StrContains(mode, "[never]")) {
    CONVOY_SKIP("this kernel gives no transparent huge pages (mode '" << mode << "')");
  }
  const Report report = RunHelper({"GLIBC_TUNABLES=glibc.malloc.perturb=0", kServerPolicy}, {});
  CHECK(report.fields.at("TUNABLES") == "glibc.malloc.perturb=0:glibc.malloc.hugetlb=1");
  CHECK(report.fields.at("HEAP_HUGE_ADVISED") == "1");
}

TEST_CASE("A user's own glibc.malloc.hugetlb wins: =0 keeps the heap in small pages", "[init]") {
  const Report report = RunHelper({"GLIBC_TUNABLES=glibc.malloc.hugetlb=0", kServerPolicy}, {"only"});
  CHECK(report.fields.at("TUNABLES") == "glibc.malloc.hugetlb=0");
  CHECK(report.fields.at("ARGS") == "only");
  CHECK(report.fields.at("HEAP_HUGE_ADVISED") == "0");
}

TEST_CASE("Every other binary's policy leaves the heap and the environment as they are", "[init]") {
  const Report report = RunHelper({"-u", "GLIBC_TUNABLES"}, {"a", "b"});
  // Not started again with the tunable: glibc's heap in the kernel's default pages.
  CHECK(report.fields.at("TUNABLES") == "(unset)");
  CHECK(report.fields.at("ARGS") == "a,b");
  CHECK(report.fields.at("HEAP_HUGE_ADVISED") == "0");
  const Report with_tunables = RunHelper({"GLIBC_TUNABLES=glibc.malloc.perturb=0"}, {});
  CHECK(with_tunables.fields.at("TUNABLES") == "glibc.malloc.perturb=0");
}

}  // namespace
}  // namespace convoy
