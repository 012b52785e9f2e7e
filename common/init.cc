#include "common/init.h"

#include <glog/logging.h>

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"

namespace convoy {

std::vector<std::string> InitProcess(int argc, char** argv, const char* usage) {
  absl::SetProgramUsageMessage(usage);
  std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  return std::vector<std::string>(positional.begin(), positional.end());
}

}  // namespace convoy
