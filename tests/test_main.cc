// The Catch2 main shared by every convoy test binary: glog to stderr, warnings and above only.
#define CATCH_CONFIG_RUNNER
#include <glog/logging.h>

#include <catch2/catch.hpp>

int main(int argc, char** argv) {
  FLAGS_logtostderr = true;
  FLAGS_minloglevel = 1;
  google::InitGoogleLogging(argv[0]);
  return Catch::Session().run(argc, argv);
}
