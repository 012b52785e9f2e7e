// Process start-up shared by every convoy binary: Abseil flags (with --help), then glog.
#ifndef CONVOY_COMMON_INIT_H_
#define CONVOY_COMMON_INIT_H_

#include <string>
#include <vector>

namespace convoy {

// Parses flags (exits on --help or a bad flag, as Abseil does), sets the usage message and starts glog
// logging to stderr. Returns the positional arguments, argv[0] first.
std::vector<std::string> InitProcess(int argc, char** argv, const char* usage);

}  // namespace convoy

#endif  // CONVOY_COMMON_INIT_H_
