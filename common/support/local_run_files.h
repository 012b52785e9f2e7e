// The files of a one-machine run's directory (convoy_train's runs/<name>) that a client needs to
// reach its parameter server: each shard's port file, the run's certificate and its bearer token.
// LocalCluster (deploy/local) writes them under these names and convoy_status reads them back, so
// `convoy_status runs/<name>` needs no address or credentials spelled out.
//
// Header-only: both users see common/, and these are a few names and one small reader.
#ifndef CONVOY_COMMON_SUPPORT_LOCAL_RUN_FILES_H_
#define CONVOY_COMMON_SUPPORT_LOCAL_RUN_FILES_H_

#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/support/files.h"

namespace convoy {

// Where a local run's servers listen (convoy_ps --bind). Its throwaway certificate is valid for
// this address (and localhost), so a client dialling it checks the certificate under this name.
inline constexpr char kLocalRunHost[] = "127.0.0.1";

// The port file of shard `index` of a run of `shards` servers: <run_dir>/ps.port for one server,
// <run_dir>/ps-<index>.port for each shard of several.
inline std::string LocalRunPortFile(const std::string& run_dir, int shards, int index) {
  return shards == 1 ? run_dir + "/ps.port" : absl::StrCat(run_dir, "/ps-", index, ".port");
}

// With metrics on (convoy_train --metrics): the Prometheus file_sd target file listing every
// process's /metrics (a JSON list of {"targets", "labels"}), and the port file each process writes
// its metrics port to (<name>: ps-<i>, agent-<i>).
inline std::string LocalRunMetricsTargets(const std::string& run_dir) {
  return run_dir + "/prometheus_targets.json";
}
inline std::string LocalRunMetricsPortFile(const std::string& run_dir, const std::string& name) {
  return absl::StrCat(run_dir, "/metrics/", name, ".port");
}

// The run's self-signed certificate (the servers' certificate, and the CA its clients trust), its
// private key (0600) and its bearer token (0600).
inline std::string LocalRunCertificate(const std::string& run_dir) {
  return run_dir + "/tls/cert.pem";
}
inline std::string LocalRunKey(const std::string& run_dir) { return run_dir + "/tls/key.pem"; }
inline std::string LocalRunTokenFile(const std::string& run_dir) { return run_dir + "/tls/token"; }

// How to reach a local run's parameter server.
struct LocalRunAccess {
  std::vector<std::string> servers;  // host:port of each shard, in shard order.
  std::string tls_ca_file;
  std::string auth_token_file;
};

// Reads the run's port files (ps.port, or ps-0.port, ps-1.port, ... up to the first one missing)
// and checks that its certificate and token are there. The ports are those the servers last wrote:
// a run that has ended leaves them, and its servers then do not answer. Errors: NOT_FOUND naming
// the directory or the first missing file (a port file means the run's first convoy_ps has
// started); INVALID_ARGUMENT naming a port file that holds no port.
inline absl::StatusOr<LocalRunAccess> ReadLocalRunAccess(const std::string& run_dir) {
  std::error_code error;
  if (!std::filesystem::is_directory(run_dir, error)) {
    return absl::NotFoundError(absl::StrCat("no run directory ", run_dir));
  }
  auto exists = [](const std::string& path) {
    std::error_code ignored;
    return std::filesystem::exists(path, ignored);
  };
  std::vector<std::string> port_files;
  if (exists(LocalRunPortFile(run_dir, 1, 0))) {
    port_files.push_back(LocalRunPortFile(run_dir, 1, 0));
  } else {
    // A sharded run has two shards at least.
    for (int i = 0; exists(LocalRunPortFile(run_dir, 2, i)); ++i) {
      port_files.push_back(LocalRunPortFile(run_dir, 2, i));
    }
  }
  if (port_files.empty()) {
    return absl::NotFoundError(
        absl::StrCat(LocalRunPortFile(run_dir, 1, 0), " is missing (nor is there a ",
                     LocalRunPortFile(run_dir, 2, 0),
                     "): not a convoy_train run directory, or its convoy_ps has not started yet"));
  }
  LocalRunAccess access;
  for (const std::string& port_file : port_files) {
    absl::StatusOr<std::string> contents = ReadFileToString(port_file);
    if (!contents.ok()) return contents.status();
    int port = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(*contents), &port) || port < 1 ||
        port > 65535) {
      return absl::InvalidArgumentError(absl::StrCat(port_file, " holds no port"));
    }
    access.servers.push_back(absl::StrCat(kLocalRunHost, ":", port));
  }
  access.tls_ca_file = LocalRunCertificate(run_dir);
  access.auth_token_file = LocalRunTokenFile(run_dir);
  for (const std::string& file : {access.tls_ca_file, access.auth_token_file}) {
    if (!exists(file)) {
      return absl::NotFoundError(
          absl::StrCat(file, " is missing: the run's credentials are not there"));
    }
  }
  return access;
}

}  // namespace convoy

#endif  // CONVOY_COMMON_SUPPORT_LOCAL_RUN_FILES_H_
