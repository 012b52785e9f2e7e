// convoy_ps: the parameter server. Holds a model's master weights and applies asynchronous gradient
// pushes from many agents; see docs/architecture.md and docs/protocol.md.
#include <glog/logging.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/metrics/prometheus_endpoint.h"
#include "common/settings/exploration.h"
#include "common/settings/flag_ranges.h"
#include "common/settings/run_settings.h"
#include "common/support/child_process.h"
#include "common/support/files.h"
#include "common/support/init.h"
#include "common/wire/security.h"
#include "param_server/service/grpc_server.h"
#include "param_server/service/ps_metrics.h"
#include "param_server/service/server_settings.h"

// The server's own settings (param_server/service/server_settings.h): --port, --model,
// --checkpoint_dir, --optimizer, ...
CONVOY_SERVER_SETTINGS(CONVOY_SERVER_SETTING_FLAG)
// The run settings agents adopt (common/settings/run_settings.h): --batch_size, --n_step, --gamma,
// ...
CONVOY_RUN_SETTINGS(CONVOY_PS_RUN_SETTING_FLAG)

// The settings this binary shares with others, as flags (common/support/settings_table.h).
CONVOY_SETTINGS_FLAGS(CONVOY_METRICS_ENDPOINT_SETTINGS, convoy::MetricsEndpointSettings,
                      MetricsEndpointSettingsFromFlags)

namespace convoy::ps {
namespace {

CONVOY_RUN_SETTINGS_FROM_FLAGS()

CONVOY_SERVER_SETTINGS_FROM_FLAGS()

// Every setting in its range: the run settings' first, then the server's own.
bool SettingsInRange(const ServerSettings& settings) {
  std::vector<FlagRange> ranges = RunSettingRanges(RunSettingsFromFlags());
  for (FlagRange& range : ServerSettingRanges(settings)) ranges.push_back(std::move(range));
  return FlagsInRange("convoy_ps", ranges);
}

// The server's Prometheus metrics at --metrics_address (none without it): GetStatus's snapshot at
// each scrape, and the optimizer steps as the core takes them.
absl::StatusOr<std::unique_ptr<PrometheusEndpoint>> StartMetrics(GrpcParameterServer& server,
                                                                 uint32_t shard) {
  auto metrics = std::make_shared<PsMetrics>(
      shard, [&service = server.service()] { return service.Status(); },
      server.core().RunConfigFor(0));
  server.core().AddStepObserver(metrics);
  return PrometheusEndpoint::Serve(MetricsEndpointSettingsFromFlags(), {metrics});
}

// What the run did, as GetStatus has it, for the log's last line: the version, the bytes on the
// wire, and each agent with the host it joined from and its pushes.
std::string FinalStatusLine(const v1::StatusResponse& status) {
  std::vector<std::string> agents;
  for (const v1::AgentStatus& agent : status.agents()) {
    agents.push_back(absl::StrCat(agent.agent_id(), "@", agent.hostname(), " (",
                                  agent.pushes_accepted(), " pushes accepted, ",
                                  agent.pushes_rejected(), " rejected)"));
  }
  return absl::StrCat("final status: version ", status.version(), ", updates ",
                      status.updates_applied(), ", bytes in ", status.bytes_in(), " out ",
                      status.bytes_out(),
                      ", agents: ", agents.empty() ? "none" : absl::StrJoin(agents, ", "));
}

int WriteCredentials(const ServerSettings& settings) {
  const std::string& dir = settings.write_credentials;
  absl::Status written =
      WriteClusterCredentials(dir, settings.credentials_server_name, settings.credentials_days);
  if (!written.ok()) {
    LOG(ERROR) << "--write_credentials: " << written;
    return 1;
  }
  std::printf("credentials in %s: tls.crt, tls.key, ca.crt, auth_token (valid for %s)\n",
              dir.c_str(), settings.credentials_server_name.c_str());
  return 0;
}

// --fault_lose_replies: that fraction of the pushes applied is answered UNAVAILABLE.
void LoseReplies(const ServerSettings& settings, GrpcParameterServer& server) {
  const double lose = settings.fault_lose_replies;
  if (lose <= 0) return;
  LOG(WARNING) << "fault injection: the replies to " << lose << " of the pushes applied are lost";
  server.service().SetAfterApplyHookForTesting(
      [lose, rng = std::mt19937_64(settings.seed)](const PushAnswer&) mutable {
        if (std::bernoulli_distribution(lose)(rng)) {
          return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                              "fault injection: the reply to this push was lost after the apply");
        }
        return grpc::Status::OK;
      });
}

// The log line that says what is served, how and where (`bound`).
std::string ServingLine(const ParameterServerOptions& options, const ModelInfo& model,
                        const ShardMap& shard_map, uint64_t version, const ServiceOptions& service,
                        const ServerSecurity& security, const std::string& bound) {
  std::ostringstream line;
  line << "convoy_ps serving model " << model.spec.name << " (" << model.fingerprint << "), "
       << (options.num_shards > 1
               ? absl::StrCat(DescribeShard(shard_map, options.shard_index), ": ")
               : "")
       << model.parameter_count << " parameters, " << model.parameter_count * sizeof(float)
       << " bytes fp32; optimizer " << OptimizerName(options.optimizer.kind) << " lr "
       << options.learning_rate
       << (options.learning_rate_decay_minibatches > 0
               ? absl::StrCat(" falling to ", options.final_learning_rate_scale, "x over ",
                              options.learning_rate_decay_minibatches, " minibatches")
               : "")
       << (options.learning_rate_decay_minutes > 0
               ? absl::StrCat(" falling to ", options.final_learning_rate_scale, "x over ",
                              options.learning_rate_decay_minutes, " minutes of training")
               : "")
       << ", steps of up to " << options.max_pushes_per_step << " pushes on " << ApplyThreads()
       << " threads, " << PushBuffersFor(service, options.max_pushes_per_step) << " push buffers ("
       << PushBuffersFor(service, options.max_pushes_per_step) * model.parameter_count *
              sizeof(float) / (1 << 20)
       << " MiB); version " << version << "; on " << bound
       << (security.tls_cert_file.empty() ? " (plaintext" : " (TLS")
       << (security.tls_client_ca_file.empty() ? "" : ", client certificates required")
       << (security.auth_token.empty() ? ", no token)" : ", bearer token)");
  return line.str();
}

// The drain of a convoy_ps whose launcher died: its final checkpoint must be written before the
// launcher's watchdog SIGKILLs it (ChildProcess::kKillAfterParentDeath after the death).
constexpr absl::Duration kShutdownGraceWhenLauncherDied = absl::Milliseconds(500);

// Serves until SIGTERM or SIGINT, then drains and writes the final checkpoint; the exit code.
int ServeUntilSignal(GrpcParameterServer& server, pid_t launcher, double shutdown_grace_seconds) {
  server.core().StartPeriodicTasks();
  const int signal = WaitForTerminationSignal();
  absl::Duration grace = absl::Seconds(shutdown_grace_seconds);
  if (LauncherDied(launcher) && grace > kShutdownGraceWhenLauncherDied) {
    grace = kShutdownGraceWhenLauncherDied;
    LOG(INFO) << "the launcher that started this server died: draining for " << grace
              << " only, then a final checkpoint";
  }
  LOG(INFO) << "signal " << signal << ": draining, then a final checkpoint";
  absl::Status stopped = server.Shutdown(grace);
  if (!stopped.ok()) {
    LOG(ERROR) << "final checkpoint failed: " << stopped;
    return 1;
  }
  LOG(INFO) << "stopped at version " << server.core().version();
  LOG(INFO) << FinalStatusLine(server.core().Status());
  return 0;
}

int Run() {
  const pid_t launcher = ::getppid();
  const ServerSettings settings = ServerSettingsFromFlags();
  if (!SettingsInRange(settings)) return kExitUsage;
  if (!settings.write_credentials.empty()) return WriteCredentials(settings);
  const absl::StatusOr<ExplorationMode> exploration = ParseExplorationMode(settings.exploration);
  if (!exploration.ok()) {
    LOG(ERROR) << "--exploration " << exploration.status().message();
    return 2;
  }
  // Signals are taken synchronously by this thread; every thread started later inherits the mask.
  BlockTerminationSignals();

  const absl::StatusOr<ServerSecurity> security = ServerSecurityFrom(settings);
  if (!security.ok()) {
    LOG(ERROR) << security.status();
    return 2;
  }
  const ParameterServerOptions options =
      ServerOptionsFrom(settings, RunSettingsFromFlags(), *exploration);
  absl::StatusOr<std::unique_ptr<ParameterServer>> core = ParameterServer::Create(options);
  if (!core.ok()) {
    LOG(ERROR) << "cannot start: " << core.status();
    // A configuration to change (bad options, a checkpoint directory of another run or model): 2.
    const absl::StatusCode code = core.status().code();
    return code == absl::StatusCode::kInvalidArgument ||
                   code == absl::StatusCode::kFailedPrecondition
               ? 2
               : 1;
  }
  const ModelInfo model = (*core)->model();
  const ShardMap shard_map = (*core)->shard_map();
  const uint64_t version = (*core)->version();
  const std::string address = absl::StrCat(settings.bind, ":", settings.port);
  const ServiceOptions service = ServiceOptionsFrom(settings);
  absl::StatusOr<std::unique_ptr<GrpcParameterServer>> server =
      GrpcParameterServer::Start(*std::move(core), address, *security, service);
  if (!server.ok()) {
    LOG(ERROR) << server.status();
    return 1;
  }
  LoseReplies(settings, **server);
  // Declared after the server, so that it stops serving scrapes before the server goes.
  absl::StatusOr<std::unique_ptr<PrometheusEndpoint>> metrics_endpoint =
      StartMetrics(**server, options.shard_index);
  if (!metrics_endpoint.ok()) {
    LOG(ERROR) << metrics_endpoint.status();
    return metrics_endpoint.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  }
  const std::string bound = absl::StrCat(settings.bind, ":", (*server)->port());
  LOG(INFO) << ServingLine(options, model, shard_map, version, service, *security, bound);
  if (const std::string& port_file = settings.port_file; !port_file.empty()) {
    // Whole or absent: a launcher polling for the file never reads half a number.
    if (absl::Status s =
            WriteFileAtomically(port_file, absl::StrCat((*server)->port(), "\n"), 0644);
        !s.ok()) {
      LOG(ERROR) << "--port_file: " << s;
      return 1;
    }
  }
  return ServeUntilSignal(**server, launcher, settings.shutdown_grace_seconds);
}

}  // namespace
}  // namespace convoy::ps

int main(int argc, char** argv) {
  convoy::InitProcess(argc, argv,
                      "convoy_ps: the convoy parameter server.\n"
                      "Usage: convoy_ps [--port=50051] [--model=cookbook] [--checkpoint_dir=DIR "
                      "--resume] [flags]",
                      convoy::ProcessPolicy{/*huge_pages_in_heap=*/true});
  return convoy::ps::Run();
}
