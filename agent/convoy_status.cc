// convoy_status: a user's view of a running parameter server, sharded or not. For each shard: its
// version, pushes/s, bytes/s in and out, rejections by reason and the age of its newest checkpoint;
// for each agent: its node, when it was last seen, its staleness, and its pushes accepted and
// rejected. With --watch it refreshes, and bytes/s are measured between refreshes (else averaged
// since each server started).
//
//   convoy_status RUN_DIR [--watch [--interval=2s]]
//   convoy_status --ps=host:port[,host:port...] [--watch [--interval=2s]] [TLS and token flags]
//
// RUN_DIR is a convoy_train run directory (runs/<name>): its servers' addresses, certificate and
// token are read from it (common/support/local_run_files.h); --ps, --tls_ca and --auth_token_file,
// when given, take the place of what it holds.
//
// Exit 0 after printing; 1 when a server does not answer (naming it); 2 for bad flags or a run
// directory that lacks the run's files (naming the missing one).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "agent/client/client_security_settings.h"
#include "agent/client/ps_client.h"
#include "agent/client/ps_transport.h"
#include "common/settings/flag_ranges.h"
#include "common/settings/process_settings.h"
#include "common/support/init.h"
#include "common/support/local_run_files.h"
#include "common/support/settings_table.h"
#include "common/support/status_macros.h"
#include "google/protobuf/util/json_util.h"

// convoy_status's own flags, a row each (common/support/settings_table.h); the settings other
// binaries take too are written through common/settings/process_settings.h.
#define CONVOY_STATUS_SETTINGS(X)                                                                  \
  CONVOY_PROCESS_SETTING(                                                                          \
      X, ps, "",                                                                                   \
      "The parameter server's host:port, or every shard's host:port,... in shard order, or @FILE " \
      "listing them one per line.")                                                                \
  X(bool, watch, false, "Refresh every --interval until interrupted.")                             \
  X(absl::Duration, interval, absl::Seconds(2), "Time between refreshes with --watch.")            \
  X(int, iterations, 0, "With --watch: stop after this many tables (0: never).")                   \
  X(bool, json, false,                                                                             \
    "Print each shard's GetStatus answer as one line of JSON (protobuf's JSON mapping, field "     \
    "names as in the .proto), in shard order, instead of the table.")
CONVOY_STATUS_SETTINGS(CONVOY_SETTING_FLAG)

// The settings this binary shares with others, as flags (common/support/settings_table.h).
CONVOY_SETTINGS_FLAGS(CONVOY_CLIENT_SECURITY_SETTINGS, convoy::agent::ClientSecuritySettings,
                      ClientSecuritySettingsFromFlags)

namespace convoy::agent {
namespace {

std::string Ago(int64_t unix_ms, absl::Time now) {
  if (unix_ms <= 0) return "never";
  const double s = absl::ToDoubleSeconds(now - absl::FromUnixMillis(unix_ms));
  return s < 120 ? absl::StrFormat("%.0f s ago", std::max(0.0, s))
                 : absl::StrFormat("%.1f min ago", s / 60);
}

std::string Rejections(const v1::StatusResponse& s) {
  std::vector<std::string> parts;
  for (const auto& [reason, count] : s.rejections()) {
    parts.push_back(absl::StrCat(absl::StripPrefix(reason, "REJECT_REASON_"), "=", count));
  }
  std::sort(parts.begin(), parts.end());
  return parts.empty() ? "none" : absl::StrJoin(parts, ",");
}

struct Sample {
  v1::StatusResponse status;
  absl::Time at;
};

// --json: each shard's answer as one line of protobuf's JSON mapping. False (said) on an error.
bool PrintJson(const std::vector<Sample>& shards) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  for (const Sample& sample : shards) {
    std::string line;
    // protobuf's own status type, which is absl::Status only from protobuf 22 on.
    if (const auto s = google::protobuf::util::MessageToJsonString(sample.status, &line, options);
        !s.ok()) {
      std::fprintf(stderr, "convoy_status: %s\n", s.ToString().c_str());
      return false;
    }
    std::printf("%s\n", line.c_str());
  }
  std::fflush(stdout);
  return true;
}

// The table of one refresh: a row per shard (bytes/s measured since `previous` when there is one of
// the same server start, else averaged since it started) and a row per agent, merged over the
// shards.
void PrintTable(const std::vector<Sample>& now, const std::vector<std::optional<Sample>>& previous,
                const std::vector<std::string>& servers) {
  const absl::Time t = absl::Now();
  std::printf("%s  model %s, %zu shard%s\n",
              absl::FormatTime("%H:%M:%S", t, absl::UTCTimeZone()).c_str(),
              now[0].status.model_name().c_str(), now.size(), now.size() == 1 ? "" : "s");
  std::printf("%-5s %-22s %9s %9s %9s %9s %-18s %s\n", "shard", "address", "version", "pushes/s",
              "in MB/s", "out MB/s", "checkpoint", "rejected");
  // Agents by id, merged over the shards: a push counts when every shard applied its range.
  struct Agent {
    std::string node;
    int64_t last_seen = 0;
    uint64_t staleness = 0, accepted = UINT64_MAX, rejected = 0;
  };
  std::map<std::string, Agent> agents;
  for (size_t i = 0; i < now.size(); ++i) {
    const v1::StatusResponse& s = now[i].status;
    double in = 0, out = 0;
    if (previous[i] && previous[i]->status.incarnation() == s.incarnation()) {
      const double dt = absl::ToDoubleSeconds(now[i].at - previous[i]->at);
      in = (s.bytes_in() - previous[i]->status.bytes_in()) / dt;
      out = (s.bytes_out() - previous[i]->status.bytes_out()) / dt;
    } else if (s.uptime_seconds() > 0) {
      in = s.bytes_in() / s.uptime_seconds();
      out = s.bytes_out() / s.uptime_seconds();
    }
    const std::string checkpoint =
        s.checkpoint_unix_ms() > 0
            ? absl::StrCat("v", s.checkpoint_version(), ", ", Ago(s.checkpoint_unix_ms(), t))
            : "none";
    std::printf("%-5u %-22s %9llu %9.1f %9.2f %9.2f %-18s %s\n", s.shard().shard_index(),
                servers[i].c_str(), static_cast<unsigned long long>(s.version()),
                s.pushes_per_second(), in / 1e6, out / 1e6, checkpoint.c_str(),
                Rejections(s).c_str());
    for (const v1::AgentStatus& a : s.agents()) {
      Agent& merged = agents[a.agent_id()];
      merged.node = a.hostname();
      merged.last_seen = std::max(merged.last_seen, a.last_seen_unix_ms());
      merged.staleness = std::max(merged.staleness, a.last_staleness());
      merged.accepted = std::min(merged.accepted, a.pushes_accepted());
      merged.rejected = std::max(merged.rejected, a.pushes_rejected());
    }
  }
  std::printf("\n%-32s %-16s %-12s %9s %9s %9s\n", "agent", "node", "last seen", "staleness",
              "accepted", "rejected");
  for (const auto& [id, a] : agents) {
    std::printf("%-32s %-16s %-12s %9llu %9llu %9llu\n", id.c_str(), a.node.c_str(),
                Ago(a.last_seen, t).c_str(), static_cast<unsigned long long>(a.staleness),
                static_cast<unsigned long long>(a.accepted == UINT64_MAX ? 0 : a.accepted),
                static_cast<unsigned long long>(a.rejected));
  }
}

// A client of each server, with the security flags (a run directory's credentials by default).
// Errors: the flags' (INVALID_ARGUMENT) or a client's.
absl::StatusOr<std::vector<std::unique_ptr<PsClient>>> Connect(
    const std::vector<std::string>& servers, const std::optional<LocalRunAccess>& run) {
  ClientSecurityDefaults defaults;
  if (run.has_value()) {
    defaults.tls_ca_file = run->tls_ca_file;
    defaults.auth_token_file = run->auth_token_file;
  }
  CONVOY_ASSIGN_OR_RETURN(const ClientSecurity security,
                          ClientSecurityFrom(ClientSecuritySettingsFromFlags(), defaults));
  std::vector<std::unique_ptr<PsClient>> clients;
  for (const std::string& address : servers) {
    PsClientOptions o;
    o.address = address;
    o.agent_id = "convoy_status";
    o.security = security;
    o.call_timeout = absl::Seconds(5);
    o.retry_for = absl::Seconds(5);
    CONVOY_ASSIGN_OR_RETURN(std::unique_ptr<PsClient> client, PsClient::Create(o));
    clients.push_back(std::move(client));
  }
  return clients;
}

// `positional` is InitProcess's: argv[0], then the run directory when one is given.
int Run(const std::vector<std::string>& positional) {
  if (positional.size() > 2) {
    std::fprintf(stderr, "convoy_status: one run directory at most, got %zu arguments\n",
                 positional.size() - 1);
    return kExitUsage;
  }
  if (!FlagsInRange("convoy_status",
                    {DurationRange("interval", absl::GetFlag(FLAGS_interval), absl::ZeroDuration(),
                                   absl::InfiniteDuration(), Ends::kOpenMin),
                     IntRange("iterations", absl::GetFlag(FLAGS_iterations), 0, kNoIntMax)})) {
    return kExitUsage;
  }
  const std::string run_dir = positional.size() == 2 ? positional[1] : "";
  std::optional<LocalRunAccess> run;
  if (!run_dir.empty()) {
    absl::StatusOr<LocalRunAccess> access = ReadLocalRunAccess(run_dir);
    if (!access.ok()) {
      std::fprintf(stderr, "convoy_status: %s\n", std::string(access.status().message()).c_str());
      return kExitUsage;
    }
    run = *std::move(access);
  } else if (absl::GetFlag(FLAGS_ps).empty()) {
    std::fprintf(stderr,
                 "convoy_status: give a run directory (convoy_status runs/<name>) or --ps\n");
    return kExitUsage;
  }
  absl::StatusOr<std::vector<std::string>> servers =
      run.has_value() && absl::GetFlag(FLAGS_ps).empty()
          ? absl::StatusOr<std::vector<std::string>>(run->servers)
          : ParseServerList(absl::GetFlag(FLAGS_ps));
  if (!servers.ok()) {
    std::fprintf(stderr, "convoy_status: %s\n", std::string(servers.status().message()).c_str());
    return kExitUsage;
  }
  absl::StatusOr<std::vector<std::unique_ptr<PsClient>>> connected = Connect(*servers, run);
  if (!connected.ok()) {
    std::fprintf(stderr, "convoy_status: %s\n", std::string(connected.status().message()).c_str());
    return kExitUsage;
  }
  std::vector<std::unique_ptr<PsClient>> clients = *std::move(connected);
  std::vector<std::optional<Sample>> previous(clients.size());
  for (int table = 1;; ++table) {
    std::vector<Sample> now(clients.size());
    for (size_t i = 0; i < clients.size(); ++i) {
      absl::StatusOr<v1::StatusResponse> status = clients[i]->Status();
      if (!status.ok()) {
        const std::string hint =
            run.has_value() ? absl::StrCat(" (has the run in ", run_dir, " ended?)") : "";
        std::fprintf(stderr, "convoy_status: %s does not answer: %s%s\n", (*servers)[i].c_str(),
                     std::string(status.status().message()).c_str(), hint.c_str());
        return 1;
      }
      now[i] = {*std::move(status), absl::Now()};
    }
    if (absl::GetFlag(FLAGS_json)) {
      if (!PrintJson(now)) return 1;
    } else {
      PrintTable(now, previous, *servers);
    }
    std::fflush(stdout);
    const int iterations = absl::GetFlag(FLAGS_iterations);
    if (!absl::GetFlag(FLAGS_watch) || (iterations > 0 && table >= iterations)) return 0;
    for (size_t i = 0; i < now.size(); ++i) previous[i] = now[i];
    absl::SleepFor(absl::GetFlag(FLAGS_interval));
    if (!absl::GetFlag(FLAGS_json)) std::printf("\n");
  }
}

}  // namespace
}  // namespace convoy::agent

int main(int argc, char** argv) {
  const std::vector<std::string> positional = convoy::InitProcess(
      argc, argv,
      "convoy_status: a running parameter server's shards and agents.\n"
      "Usage: convoy_status RUN_DIR [--watch]   (a convoy_train run directory, runs/<name>)\n"
      "       convoy_status --ps=host:port[,host:port...] [--watch] [TLS flags]");
  return convoy::agent::Run(positional);
}
