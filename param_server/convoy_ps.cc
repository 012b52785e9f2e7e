// convoy_ps: the parameter server. Holds a model's master weights and applies asynchronous gradient
// pushes from many agents; see docs/architecture.md and docs/protocol.md.
#include <glog/logging.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <sstream>
#include <string>
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

namespace {
// The defaults every flag below shows: ParameterServerOptions', written once there.
const convoy::ps::ParameterServerOptions& Defaults() {
  static const convoy::ps::ParameterServerOptions* const defaults =
      new convoy::ps::ParameterServerOptions();
  return *defaults;
}
}  // namespace

ABSL_FLAG(int, port, 50051, "Port to listen on; 0 picks a free one (see --port_file).");
ABSL_FLAG(std::string, bind, "0.0.0.0", "Address to listen on.");
ABSL_FLAG(std::string, port_file, "",
          "If set, the bound port is written to this file once serving.");
ABSL_FLAG(std::string, model, Defaults().model,
          "Model to serve (registry name, e.g. cookbook, nature_dueling).");
ABSL_FLAG(int, num_actions, Defaults().num_actions, "Number of discrete actions of the Q-network.");
ABSL_FLAG(uint64_t, seed, Defaults().seed, "Seed of the initial weights.");
ABSL_FLAG(
    std::string, init_checkpoint, "",
    "Take the initial weights from: a checkpoint directory (ckpt-...), a run's --checkpoint_dir "
    "(its newest), or a sharded run's checkpoint set (the directory holding shard-0, shard-1, "
    "...), assembled; each shard takes its slice, so a run can restart with another "
    "--num_shards. The optimizer's state and the versions start over.");
ABSL_FLAG(std::string, checkpoint_dir, "", "Directory for checkpoints; empty disables them.");
ABSL_FLAG(bool, resume, Defaults().resume,
          "Continue the run of the newest valid checkpoint in --checkpoint_dir. Without it, a "
          "--checkpoint_dir that holds checkpoints is refused (exit 2): they are another run's.");
ABSL_FLAG(int, keep_checkpoints, Defaults().keep_checkpoints, "Newest checkpoints to keep.");
ABSL_FLAG(uint64_t, checkpoint_every_updates, Defaults().checkpoint_every_updates,
          "Checkpoint every N applied updates (0: off).");
ABSL_FLAG(double, checkpoint_every_seconds, absl::ToDoubleSeconds(Defaults().checkpoint_every),
          "Checkpoint every N seconds (0: off).");
ABSL_FLAG(convoy::ps::Optimizer, optimizer, Defaults().optimizer.kind,
          "adam, adamw, rmsprop, sgd, or delta (w += pushed tensor).");
ABSL_FLAG(double, beta1, Defaults().optimizer.beta1, "Adam beta1.");
ABSL_FLAG(double, beta2, Defaults().optimizer.beta2, "Adam beta2.");
ABSL_FLAG(double, eps, Defaults().optimizer.eps, "Optimizer epsilon (Adam, RMSprop).");
ABSL_FLAG(double, weight_decay, Defaults().optimizer.weight_decay,
          "Weight decay (L2; decoupled for adamw).");
ABSL_FLAG(double, momentum, Defaults().optimizer.momentum, "Momentum for sgd and rmsprop.");
ABSL_FLAG(double, rmsprop_alpha, Defaults().optimizer.rmsprop_alpha, "RMSprop smoothing constant.");
ABSL_FLAG(double, max_grad_norm, Defaults().optimizer.max_grad_norm,
          "Clip each pushed gradient's L2 norm to this (0: off).");
ABSL_FLAG(int64_t, max_staleness, Defaults().max_staleness,
          "Reject pushes computed more than this many versions ago (-1: accept any).");
ABSL_FLAG(bool, staleness_lr_scaling, Defaults().staleness_lr_scaling,
          "Apply a push s versions old with lr / (1 + s).");
ABSL_FLAG(uint64_t, average_horizon, Defaults().average_horizon,
          "The averaged network (pull NETWORK_AVERAGE; average.pt in checkpoints): the online "
          "weights averaged exponentially over this many applied minibatches (0: off).");
ABSL_FLAG(double, average_every_seconds, absl::ToDoubleSeconds(Defaults().average_every),
          "Seconds between folds of the online weights into the averaged network.");
ABSL_FLAG(
    std::string, exploration, convoy::ExplorationModeName(Defaults().exploration.mode),
    "global: one epsilon decayed per update (the cookbook's); apex: fixed per-agent epsilons.");
ABSL_FLAG(double, start_epsilon, Defaults().exploration.start_epsilon, "Initial global epsilon.");
ABSL_FLAG(double, apex_base_epsilon, Defaults().exploration.apex_base_epsilon,
          "Ape-X: epsilon_i = base^(1 + alpha * i / (N - 1)).");
ABSL_FLAG(double, apex_alpha, Defaults().exploration.apex_alpha, "Ape-X alpha.");
ABSL_FLAG(uint32_t, apex_num_agents, Defaults().exploration.apex_num_agents,
          "Ape-X: N, the number of agents.");
// The run settings agents adopt (common/settings/run_settings.h): --batch_size, --n_step, --gamma,
// ...
CONVOY_RUN_SETTINGS(CONVOY_PS_RUN_SETTING_FLAG)
ABSL_FLAG(double, shutdown_grace_seconds, 10,
          "How long in-flight RPCs may run on after SIGTERM (0.5 s at most when the launcher that "
          "started this server died: common/support/child_process.h).");
ABSL_FLAG(std::string, tls_cert, "", "PEM certificate chain to serve TLS with.");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert.");
ABSL_FLAG(std::string, tls_client_ca, "",
          "PEM CA certificate: require clients to present a certificate it signed (mutual TLS).");
ABSL_FLAG(std::string, auth_token_file, "",
          "File holding the bearer token every call must carry (else $CONVOY_AUTH_TOKEN; neither: "
          "none).");
ABSL_FLAG(
    bool, insecure, false,
    "Serve plaintext (no --tls_cert; logs a warning). Off by default: without TLS files the server "
    "refuses to start unless this is given.");
ABSL_FLAG(
    std::string, write_credentials, "",
    "Write DIR/tls.crt, DIR/tls.key, DIR/ca.crt and DIR/auth_token for a cluster run (keeping "
    "any already there), then exit. Serve with --tls_cert=DIR/tls.crt --tls_key=DIR/tls.key "
    "--auth_token_file=DIR/auth_token; clients take --tls_ca=DIR/ca.crt "
    "--tls_server_name=<--credentials_server_name> --auth_token_file=DIR/auth_token.");
ABSL_FLAG(
    std::string, credentials_server_name, "convoy-ps",
    "DNS name the --write_credentials certificate is valid for (besides localhost and 127.0.0.1).");
ABSL_FLAG(int, credentials_days, 365, "Validity of the --write_credentials certificate, days.");
ABSL_FLAG(bool, health_without_auth, false, "Answer health checks without the bearer token.");
ABSL_FLAG(double, stream_idle_timeout_seconds, 60,
          "Cancel a push stream that sends no chunk for this long, so a stalled client frees its "
          "push buffer (0: never).");
ABSL_FLAG(uint32_t, max_pushes_per_step, Defaults().max_pushes_per_step,
          "Pushes one optimizer step may combine: the apply worker drains up to this many queued "
          "pushes, decides each (exactly-once, lineage, staleness) against the version before the "
          "step, and steps once on the accepted ones' minibatch-weighted mean, making one version. "
          "1: one step per push.");
ABSL_FLAG(uint32_t, push_buffers, 0,
          "Model-sized buffers pushes are received into: the bound on pushes being received, "
          "queued or applied, and on their memory (this x parameters x 4 bytes). 0: 2 x "
          "--max_pushes_per_step + 4.");
ABSL_FLAG(uint32_t, max_waiting_pushes, 4096,
          "Push streams that may wait, unread, for a buffer; the next is refused with "
          "RESOURCE_EXHAUSTED (SERVER_BUSY) and a retry delay, which agents honour.");
ABSL_FLAG(
    uint32_t, concurrent_pulls, 0,
    "Pulls written at once (each of the newest version when its turn comes); the others wait, "
    "holding nothing, so the weights in flight are bounded. 0: as many as the default push "
    "buffers.");
ABSL_FLAG(uint32_t, max_waiting_pulls, 4096,
          "Pulls that may wait for their turn (--concurrent_pulls); the next is refused with "
          "RESOURCE_EXHAUSTED and a retry delay, which agents honour.");
ABSL_FLAG(uint32_t, busy_retry_after_ms, 250,
          "The retry delay, ms, that a refusal for a busy server asks of the agent (gRPC's retry "
          "pushback); agents wait it out with up to half again as jitter.");
ABSL_FLAG(uint32_t, receive_window_kib, 256,
          "Each stream's HTTP/2 receive window, KiB, fixed: what a push waiting for a buffer may "
          "have sent ahead (the transport holds about connections x this), and one push's rate is "
          "at most this per round trip. 0: gRPC's adaptive window (BDP probing), which grows to "
          "megabytes per connection.");
ABSL_FLAG(uint32_t, apply_threads, 0,
          "Threads of the optimizer step (LibTorch's intra-op pool: the combination of a step's "
          "pushes and the optimizer's element-wise work, split into ranges of the parameters). "
          "0: one per core.");
ABSL_FLAG(std::string, apply_log, "",
          "Append every start, applied update (which agent's push became which version) and "
          "checkpoint to this file, one line each, for audits and replays; empty: none.");
ABSL_FLAG(uint32_t, num_shards, 1,
          "Serve one of this many shards of the model's parameters (contiguous ranges balanced by "
          "element count); agents list every shard's address in --ps, in shard order.");
ABSL_FLAG(uint32_t, shard_index, 0, "Which shard this server is, 0-based (below --num_shards).");
ABSL_FLAG(double, fault_lose_replies, 0,
          "Fault injection, for tests: answer this fraction of the pushes applied with UNAVAILABLE "
          "instead of their reply, as a connection lost just after the apply looks to an agent.");

// The settings this binary shares with others, as flags (common/support/settings_table.h).
CONVOY_SETTINGS_FLAGS(CONVOY_METRICS_ENDPOINT_SETTINGS, convoy::MetricsEndpointSettings,
                      MetricsEndpointSettingsFromFlags)

namespace convoy::ps {
namespace {

CONVOY_RUN_SETTINGS_FROM_FLAGS()

// Every numeric flag but --seed and --checkpoint_every_updates, which take any value; the run
// settings' ranges are the table's.
bool NumericFlagsInRange() {
  std::vector<FlagRange> ranges = RunSettingRanges(RunSettingsFromFlags());
  const std::vector<FlagRange> others = {
      IntRange("port", absl::GetFlag(FLAGS_port), 0, 65535),
      IntRange("num_actions", absl::GetFlag(FLAGS_num_actions), 1, 4096),
      IntRange("keep_checkpoints", absl::GetFlag(FLAGS_keep_checkpoints), 1, 100000),
      RealRange("checkpoint_every_seconds", absl::GetFlag(FLAGS_checkpoint_every_seconds), 0,
                kNoRealMax),
      RealRange("beta1", absl::GetFlag(FLAGS_beta1), 0, 1, Ends::kOpenMax),
      RealRange("beta2", absl::GetFlag(FLAGS_beta2), 0, 1, Ends::kOpenMax),
      RealRange("eps", absl::GetFlag(FLAGS_eps), 0, 1, Ends::kOpenMin),
      RealRange("weight_decay", absl::GetFlag(FLAGS_weight_decay), 0, 1),
      RealRange("momentum", absl::GetFlag(FLAGS_momentum), 0, 1, Ends::kOpenMax),
      RealRange("rmsprop_alpha", absl::GetFlag(FLAGS_rmsprop_alpha), 0, 1, Ends::kOpenMax),
      RealRange("max_grad_norm", absl::GetFlag(FLAGS_max_grad_norm), 0, kNoRealMax),
      IntRange("max_staleness", absl::GetFlag(FLAGS_max_staleness), -1, kNoIntMax),
      UintRange("average_horizon", absl::GetFlag(FLAGS_average_horizon), 0, kNoUintMax),
      RealRange("average_every_seconds", absl::GetFlag(FLAGS_average_every_seconds), 0, kNoRealMax,
                Ends::kOpenMin),
      RealRange("start_epsilon", absl::GetFlag(FLAGS_start_epsilon), 0, 1),
      RealRange("apex_base_epsilon", absl::GetFlag(FLAGS_apex_base_epsilon), 0, 1),
      RealRange("apex_alpha", absl::GetFlag(FLAGS_apex_alpha), 0, 100),
      UintRange("apex_num_agents", absl::GetFlag(FLAGS_apex_num_agents), 1, 65536),
      RealRange("shutdown_grace_seconds", absl::GetFlag(FLAGS_shutdown_grace_seconds), 0,
                kNoRealMax),
      IntRange("credentials_days", absl::GetFlag(FLAGS_credentials_days), 1, 36500),
      RealRange("stream_idle_timeout_seconds", absl::GetFlag(FLAGS_stream_idle_timeout_seconds), 0,
                kNoRealMax),
      RealRange("fault_lose_replies", absl::GetFlag(FLAGS_fault_lose_replies), 0, 1),
      UintRange("max_pushes_per_step", absl::GetFlag(FLAGS_max_pushes_per_step), 1, 65536),
      UintRange("push_buffers", absl::GetFlag(FLAGS_push_buffers), 0, 1 << 20),
      UintRange("max_waiting_pushes", absl::GetFlag(FLAGS_max_waiting_pushes), 0, 1 << 24),
      UintRange("concurrent_pulls", absl::GetFlag(FLAGS_concurrent_pulls), 0, 1 << 20),
      UintRange("max_waiting_pulls", absl::GetFlag(FLAGS_max_waiting_pulls), 0, 1 << 24),
      UintRange("busy_retry_after_ms", absl::GetFlag(FLAGS_busy_retry_after_ms), 1, 3600000),
      UintRange("receive_window_kib", absl::GetFlag(FLAGS_receive_window_kib), 0, 1 << 20),
      UintRange("apply_threads", absl::GetFlag(FLAGS_apply_threads), 0, 4096),
      UintRange("num_shards", absl::GetFlag(FLAGS_num_shards), 1, 65536),
      UintRange("shard_index", absl::GetFlag(FLAGS_shard_index), 0,
                std::max<uint32_t>(absl::GetFlag(FLAGS_num_shards), 1) - 1)};
  ranges.insert(ranges.end(), others.begin(), others.end());
  return FlagsInRange("convoy_ps", ranges);
}

// `exploration`: --exploration, parsed by the caller.
ParameterServerOptions OptionsFromFlags(ExplorationMode exploration) {
  ParameterServerOptions o;
  o.model = absl::GetFlag(FLAGS_model);
  o.num_actions = absl::GetFlag(FLAGS_num_actions);
  o.seed = absl::GetFlag(FLAGS_seed);
  o.init_checkpoint = absl::GetFlag(FLAGS_init_checkpoint);
  o.checkpoint_dir = absl::GetFlag(FLAGS_checkpoint_dir);
  o.resume = absl::GetFlag(FLAGS_resume);
  o.keep_checkpoints = absl::GetFlag(FLAGS_keep_checkpoints);
  o.checkpoint_every_updates = absl::GetFlag(FLAGS_checkpoint_every_updates);
  o.checkpoint_every = absl::Seconds(absl::GetFlag(FLAGS_checkpoint_every_seconds));
  o.optimizer.kind = absl::GetFlag(FLAGS_optimizer);
  o.optimizer.beta1 = absl::GetFlag(FLAGS_beta1);
  o.optimizer.beta2 = absl::GetFlag(FLAGS_beta2);
  o.optimizer.eps = absl::GetFlag(FLAGS_eps);
  o.optimizer.weight_decay = absl::GetFlag(FLAGS_weight_decay);
  o.optimizer.momentum = absl::GetFlag(FLAGS_momentum);
  o.optimizer.rmsprop_alpha = absl::GetFlag(FLAGS_rmsprop_alpha);
  o.optimizer.max_grad_norm = absl::GetFlag(FLAGS_max_grad_norm);
  o.max_staleness = absl::GetFlag(FLAGS_max_staleness);
  o.staleness_lr_scaling = absl::GetFlag(FLAGS_staleness_lr_scaling);
  o.average_horizon = absl::GetFlag(FLAGS_average_horizon);
  o.average_every = absl::Seconds(absl::GetFlag(FLAGS_average_every_seconds));
  o.exploration.mode = exploration;
  o.exploration.start_epsilon = absl::GetFlag(FLAGS_start_epsilon);
  o.exploration.apex_base_epsilon = absl::GetFlag(FLAGS_apex_base_epsilon);
  o.exploration.apex_alpha = absl::GetFlag(FLAGS_apex_alpha);
  o.exploration.apex_num_agents = absl::GetFlag(FLAGS_apex_num_agents);
  static_cast<RunSettings&>(o) = RunSettingsFromFlags();
  o.apply_log = absl::GetFlag(FLAGS_apply_log);
  o.num_shards = absl::GetFlag(FLAGS_num_shards);
  o.shard_index = absl::GetFlag(FLAGS_shard_index);
  o.max_pushes_per_step = absl::GetFlag(FLAGS_max_pushes_per_step);
  o.apply_threads = absl::GetFlag(FLAGS_apply_threads);
  return o;
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

int WriteCredentials(const std::string& dir) {
  absl::Status written = WriteClusterCredentials(dir, absl::GetFlag(FLAGS_credentials_server_name),
                                                 absl::GetFlag(FLAGS_credentials_days));
  if (!written.ok()) {
    LOG(ERROR) << "--write_credentials: " << written;
    return 1;
  }
  std::printf("credentials in %s: tls.crt, tls.key, ca.crt, auth_token (valid for %s)\n",
              dir.c_str(), absl::GetFlag(FLAGS_credentials_server_name).c_str());
  return 0;
}

// The TLS files, the token and the client CA of the flags. Before any checkpoint is read, a
// misconfigured server stops at once, naming the flags to give.
absl::StatusOr<ServerSecurity> SecurityFromFlags() {
  absl::StatusOr<std::string> token = ReadAuthToken(absl::GetFlag(FLAGS_auth_token_file));
  if (!token.ok()) return token.status();
  ServerSecurity security;
  security.tls_cert_file = absl::GetFlag(FLAGS_tls_cert);
  security.tls_key_file = absl::GetFlag(FLAGS_tls_key);
  security.tls_client_ca_file = absl::GetFlag(FLAGS_tls_client_ca);
  security.auth_token = *token;
  security.insecure = absl::GetFlag(FLAGS_insecure);
  security.health_without_auth = absl::GetFlag(FLAGS_health_without_auth);
  // (Plaintext has nothing to check, and its warning comes once, from the server's start.)
  const bool plaintext =
      security.insecure && security.tls_cert_file.empty() && security.tls_key_file.empty();
  if (!plaintext) {
    if (absl::Status checked = MakeServerCredentials(security).status(); !checked.ok()) {
      return checked;
    }
  }
  return security;
}

ServiceOptions ServiceOptionsFromFlags() {
  ServiceOptions service;
  service.stream_idle_timeout = absl::Seconds(absl::GetFlag(FLAGS_stream_idle_timeout_seconds));
  service.push_buffers = absl::GetFlag(FLAGS_push_buffers);
  service.max_waiting_pushes = absl::GetFlag(FLAGS_max_waiting_pushes);
  service.concurrent_pulls = absl::GetFlag(FLAGS_concurrent_pulls);
  service.max_waiting_pulls = absl::GetFlag(FLAGS_max_waiting_pulls);
  service.busy_retry_after = absl::Milliseconds(absl::GetFlag(FLAGS_busy_retry_after_ms));
  service.receive_window_bytes = absl::GetFlag(FLAGS_receive_window_kib) << 10;
  return service;
}

// --fault_lose_replies: that fraction of the pushes applied is answered UNAVAILABLE.
void LoseRepliesFromFlags(GrpcParameterServer& server) {
  const double lose = absl::GetFlag(FLAGS_fault_lose_replies);
  if (lose <= 0) return;
  LOG(WARNING) << "fault injection: the replies to " << lose << " of the pushes applied are lost";
  server.service().SetAfterApplyHookForTesting(
      [lose, rng = std::mt19937_64(absl::GetFlag(FLAGS_seed))](const PushAnswer&) mutable {
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
int ServeUntilSignal(GrpcParameterServer& server, pid_t launcher) {
  server.core().StartPeriodicTasks();
  const int signal = WaitForTerminationSignal();
  absl::Duration grace = absl::Seconds(absl::GetFlag(FLAGS_shutdown_grace_seconds));
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
  if (!NumericFlagsInRange()) return kExitUsage;
  if (const std::string dir = absl::GetFlag(FLAGS_write_credentials); !dir.empty()) {
    return WriteCredentials(dir);
  }
  const absl::StatusOr<ExplorationMode> exploration =
      ParseExplorationMode(absl::GetFlag(FLAGS_exploration));
  if (!exploration.ok()) {
    LOG(ERROR) << "--exploration " << exploration.status().message();
    return 2;
  }
  // Signals are taken synchronously by this thread; every thread started later inherits the mask.
  BlockTerminationSignals();

  const absl::StatusOr<ServerSecurity> security = SecurityFromFlags();
  if (!security.ok()) {
    LOG(ERROR) << security.status();
    return 2;
  }
  const ParameterServerOptions options = OptionsFromFlags(*exploration);
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
  const std::string address =
      absl::StrCat(absl::GetFlag(FLAGS_bind), ":", absl::GetFlag(FLAGS_port));
  const ServiceOptions service = ServiceOptionsFromFlags();
  absl::StatusOr<std::unique_ptr<GrpcParameterServer>> server =
      GrpcParameterServer::Start(*std::move(core), address, *security, service);
  if (!server.ok()) {
    LOG(ERROR) << server.status();
    return 1;
  }
  LoseRepliesFromFlags(**server);
  // Declared after the server, so that it stops serving scrapes before the server goes.
  absl::StatusOr<std::unique_ptr<PrometheusEndpoint>> metrics_endpoint =
      StartMetrics(**server, options.shard_index);
  if (!metrics_endpoint.ok()) {
    LOG(ERROR) << metrics_endpoint.status();
    return metrics_endpoint.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  }
  const std::string bound = absl::StrCat(absl::GetFlag(FLAGS_bind), ":", (*server)->port());
  LOG(INFO) << ServingLine(options, model, shard_map, version, service, *security, bound);
  if (const std::string port_file = absl::GetFlag(FLAGS_port_file); !port_file.empty()) {
    // Whole or absent: a launcher polling for the file never reads half a number.
    if (absl::Status s =
            WriteFileAtomically(port_file, absl::StrCat((*server)->port(), "\n"), 0644);
        !s.ok()) {
      LOG(ERROR) << "--port_file: " << s;
      return 1;
    }
  }
  return ServeUntilSignal(**server, launcher);
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
