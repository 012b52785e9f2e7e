// For init_test: a process started as convoy's binaries start (InitProcess, with convoy_ps's policy when
// CONVOY_INIT_HELPER_HUGE_PAGES=1), which then reports on
// stdout what it runs with: its GLIBC_TUNABLES, its pid, its positional arguments, and whether its
// heap, once 32 MiB were allocated and touched, is advised for huge pages (smaps' "hg" flag).
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "common/support/init.h"

int main(int argc, char** argv) {
  // CONVOY_INIT_HELPER_HUGE_PAGES=1: the policy convoy_ps starts with; otherwise every other binary's.
  const char* huge = std::getenv("CONVOY_INIT_HELPER_HUGE_PAGES");
  convoy::ProcessPolicy policy;
  policy.huge_pages_in_heap = huge != nullptr && std::strcmp(huge, "1") == 0;
  const std::vector<std::string> positional =
      convoy::InitProcess(argc, argv, "init_test helper", policy);
  constexpr size_t kBytes = size_t{32} << 20;
  char* block = static_cast<char*>(std::malloc(kBytes));
  std::memset(block, 1, kBytes);
  bool advised = false;
  std::ifstream smaps("/proc/self/smaps");
  bool in_heap = false;
  for (std::string line; std::getline(smaps, line);) {
    // A mapping's first line starts with its range in lowercase hex (and names "[heap]" for the
    // heap); its fields are capitalised; VmFlags is the last.
    const bool range = !line.empty() && (std::isdigit(static_cast<unsigned char>(line[0])) ||
                                         (line[0] >= 'a' && line[0] <= 'f'));
    if (range) {
      in_heap = absl::EndsWith(line, "[heap]");
    } else if (in_heap && absl::StartsWith(line, "VmFlags:")) {
      advised = advised || absl::StrContains(line + " ", " hg ");
    }
  }
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  std::printf("TUNABLES=%s\nPID=%d\nARGS=%s\nHEAP_HUGE_ADVISED=%d\n",
              tunables == nullptr ? "(unset)" : tunables, static_cast<int>(getpid()),
              absl::StrJoin(positional.begin() + 1, positional.end(), ",").c_str(),
              advised ? 1 : 0);
  std::free(block);
  return 0;
}
