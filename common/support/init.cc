#include "common/support/init.h"

#include <glog/logging.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/auxv.h>
#include <unistd.h>

#include <fstream>
#include <optional>
#include <string>

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace convoy {

std::vector<std::string> InitProcess(int argc, char** argv, const char* usage,
                                     ProcessPolicy policy) {
  if (policy.huge_pages_in_heap) UseHugePagesInHeap(argv);
  PollGrpcConnectionAttempts();
  absl::SetProgramUsageMessage(usage);
  // --help lists every convoy flag the binary has, also those defined beside main's file (such as the
  // client security flags), and leaves out Abseil's own.
  absl::FlagsUsageConfig config;
  config.contains_help_flags = [](absl::string_view file) { return !absl::StrContains(file, "absl/"); };
  config.contains_helpshort_flags = config.contains_help_flags;
  absl::SetFlagsUsageConfig(config);
  std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  KeepLargeAllocationsInHeap();
  return std::vector<std::string>(positional.begin(), positional.end());
}

namespace {
sigset_t TerminationSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);  // A closed terminal: the same clean stop (convoy_ps checkpoints).
  return signals;
}
}  // namespace

void BlockTerminationSignals() {
  const sigset_t signals = TerminationSignals();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
}

int WaitForTerminationSignal() {
  const sigset_t signals = TerminationSignals();
  int signal = 0;
  sigwait(&signals, &signal);
  return signal;
}

void KeepLargeAllocationsInHeap() {
  static const bool done = [] {
    mallopt(M_MMAP_THRESHOLD, 64 << 20);
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
    // One arena: glibc unmaps a thread arena's heap as soon as it is empty, whatever the trim
    // threshold, so model-sized blocks freed on gRPC's threads came back as fresh pages to fault in.
    mallopt(M_ARENA_MAX, 1);
    return true;
  }();
  (void)done;
}

void UseHugePagesInHeap(char** argv) {
  constexpr absl::string_view kTunable = "glibc.malloc.hugetlb";
  const char* const set = ::getenv("GLIBC_TUNABLES");
  const std::optional<std::string> tunables =
      set == nullptr ? std::nullopt : std::optional<std::string>(set);
  if (tunables.has_value() && absl::StrContains(*tunables, kTunable)) return;
  // A secure-execution process (setuid, file capabilities) has GLIBC_TUNABLES dropped by the
  // loader: started again it would not see the tunable, and would start again, and again.
  if (::getauxval(AT_SECURE) != 0) return;
  // "always [madvise] never": the brackets mark the mode. Without "[never]" the kernel may give
  // huge pages; without the file it has none to give.
  std::ifstream mode_file("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string mode;
  if (!std::getline(mode_file, mode) || absl::StrContains(mode, "[never]")) return;
  const std::string with = !tunables.has_value() || tunables->empty()
                               ? absl::StrCat(kTunable, "=1")
                               : absl::StrCat(*tunables, ":", kTunable, "=1");
  ::setenv("GLIBC_TUNABLES", with.c_str(), /*overwrite=*/1);
  ::execv("/proc/self/exe", argv);
  // Not started again (the executable gone, say): go on as we are, without the tunable named, so
  // that children are not told of a tunable this process does not have.
  if (tunables.has_value()) {
    ::setenv("GLIBC_TUNABLES", tunables->c_str(), /*overwrite=*/1);
  } else {
    ::unsetenv("GLIBC_TUNABLES");
  }
}

void PollGrpcConnectionAttempts() {
  ::setenv("GRPC_CLIENT_CHANNEL_BACKUP_POLL_INTERVAL_MS", "100", /*overwrite=*/0);
}

}  // namespace convoy
