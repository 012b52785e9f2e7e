#include "common/init.h"

#include <glog/logging.h>
#include <malloc.h>

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"

namespace convoy {

std::vector<std::string> InitProcess(int argc, char** argv, const char* usage) {
  absl::SetProgramUsageMessage(usage);
  std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  KeepLargeAllocationsInHeap();
  return std::vector<std::string>(positional.begin(), positional.end());
}

void KeepLargeAllocationsInHeap() {
  static const bool done = [] {
    mallopt(M_MMAP_THRESHOLD, 64 << 20);
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
    return true;
  }();
  (void)done;
}

}  // namespace convoy
