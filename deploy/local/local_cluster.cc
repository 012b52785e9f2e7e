#include "deploy/local/local_cluster.h"

#include <glog/logging.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/model/model_registry.h"
#include "common/model/shard_map.h"
#include "common/support/local_run_files.h"
#include "common/support/secret_file.h"
#include "common/support/status_macros.h"
#include "common/wire/security.h"
#include "param_server/core/checkpointer.h"

namespace convoy::deploy {
namespace {

constexpr absl::Duration kPortFilePollInterval = absl::Milliseconds(50);
constexpr absl::Duration kPsClientRetryFor = absl::Seconds(10);

// The port `process` (named `what`) writes to `port_file` once it listens.
absl::StatusOr<int> WaitForPort(const std::string& port_file, ChildProcess& process,
                                absl::Duration timeout, absl::string_view what = "convoy_ps") {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline && process.running()) {
    std::ifstream in(port_file);
    int port = 0;
    if (in >> port && port > 0) return port;
    absl::SleepFor(kPortFilePollInterval);
  }
  return absl::UnavailableError(absl::StrCat(what, " did not start; see its log"));
}

// The metrics flags of the process `name` of a run with metrics on.
std::vector<std::string> MetricsArgs(const LocalClusterOptions& options, const std::string& name) {
  if (!options.metrics) return {};
  return {absl::StrCat("--metrics_address=", kLocalRunHost, ":0"),
          "--metrics_port_file=" + LocalRunMetricsPortFile(options.run_dir, name)};
}

// Where shard `index` of the run keeps its checkpoints.
std::string CheckpointDir(const LocalClusterOptions& options, int index) {
  return options.ps_shards == 1 ? options.run_dir + "/checkpoints"
                                : absl::StrCat(options.run_dir, "/checkpoints/shard-", index);
}

std::string AgentLogDir(const LocalClusterOptions& options, int index) {
  return absl::StrCat(options.run_dir, "/agent-", index);
}

}  // namespace

absl::StatusOr<std::unique_ptr<LocalCluster>> LocalCluster::Start(
    const LocalClusterOptions& options) {
  CONVOY_ASSIGN_OR_RETURN(const ModelInfo info, DescribeModel(options.model));
  if (options.ps_shards < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--ps_shards must be at least 1, got ", options.ps_shards));
  }
  // A run is sharded or not for its whole life: its checkpoints say which.
  const std::string checkpoints = options.run_dir + "/checkpoints";
  const bool was_sharded = std::filesystem::exists(checkpoints + "/shard-0");
  const bool was_whole = !ps::Checkpointer::CheckUnused(checkpoints).ok();
  if ((options.ps_shards > 1 && was_whole) || (options.ps_shards == 1 && was_sharded)) {
    return absl::FailedPreconditionError(
        absl::StrCat("run directory ", options.run_dir, " holds the checkpoints of a run with ",
                     was_whole ? "one server" : "a sharded server", ", not ", options.ps_shards,
                     options.ps_shards == 1 ? " server" : " shards",
                     ": resume it as it was started, or start a new run"));
  }
  if (!options.resume) {
    for (int i = 0; i < options.ps_shards; ++i) {
      if (absl::Status s = ps::Checkpointer::CheckUnused(CheckpointDir(options, i)); !s.ok()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "run directory ", options.run_dir, " is a run started before: ", s.message()));
      }
    }
  }
  const std::string bin = options.bin_dir.empty() ? ExecutableDirectory() : options.bin_dir;
  std::filesystem::create_directories(options.run_dir);
  // A resumed run's processes listen on new ports: the old port files and targets must not be read.
  std::filesystem::remove_all(options.run_dir + "/metrics");
  std::filesystem::remove(LocalRunMetricsTargets(options.run_dir));
  if (options.metrics) std::filesystem::create_directories(options.run_dir + "/metrics");
  // A throwaway certificate and token for this run: local runs are TLS and authenticated like
  // clusters.
  Credentials credentials;
  credentials.cert = LocalRunCertificate(options.run_dir);
  credentials.key = LocalRunKey(options.run_dir);
  credentials.token_file = LocalRunTokenFile(options.run_dir);
  std::filesystem::create_directories(std::filesystem::path(credentials.cert).parent_path());
  CONVOY_RETURN_IF_ERROR(WriteSelfSignedCertificate(credentials.cert, credentials.key));
  credentials.token = GenerateAuthToken();
  CONVOY_RETURN_IF_ERROR(WriteSecretFile(credentials.token_file, credentials.token + "\n"));
  std::unique_ptr<LocalCluster> cluster(new LocalCluster(options, std::move(credentials)));
  // On an error the destructor stops whatever was started.
  CONVOY_RETURN_IF_ERROR(cluster->StartServers(bin, info));
  CONVOY_RETURN_IF_ERROR(cluster->StartAgents());
  CONVOY_RETURN_IF_ERROR(cluster->WriteMetricsTargets());
  return cluster;
}

absl::Status LocalCluster::StartServers(const std::string& bin, const ModelInfo& model) {
  const LocalClusterOptions& options = options_;
  const int shards = options.ps_shards;
  CONVOY_ASSIGN_OR_RETURN(const ShardMap map, MakeShardMap(model, static_cast<uint32_t>(shards)));
  std::vector<std::string> addresses;
  for (int i = 0; i < shards; ++i) {
    const std::string suffix = shards == 1 ? "" : absl::StrCat("-", i);
    const std::string port_file = LocalRunPortFile(options.run_dir, shards, i);
    std::filesystem::remove(port_file);
    ChildProcess::Options ps_options;
    ps_options.log_path = absl::StrCat(options.run_dir, "/convoy_ps", suffix, ".log");
    if (i == 0) ps_log_ = ps_options.log_path;
    std::vector<std::string> args = {
        bin + "/convoy_ps",
        "--port=0",
        absl::StrCat("--bind=", kLocalRunHost),
        "--port_file=" + port_file,
        "--checkpoint_dir=" + CheckpointDir(options, i),
        absl::StrCat("--checkpoint_every_seconds=", absl::ToInt64Seconds(options.checkpoint_every)),
        "--model=" + options.model,
        absl::StrCat("--seed=", options.seed),
        absl::StrCat("--average_horizon=", options.average_horizon),
        absl::StrCat("--resume=", options.resume),
        absl::StrCat("--apex_num_agents=", options.agents),
        absl::StrCat("--num_shards=", shards),
        absl::StrCat("--shard_index=", i),
        "--tls_cert=" + credentials_.cert,
        "--tls_key=" + credentials_.key,
        "--auth_token_file=" + credentials_.token_file};
    for (std::string& arg : RunSettingArgs(options)) args.push_back(std::move(arg));
    for (std::string& arg : MetricsArgs(options, absl::StrCat("ps-", i))) {
      args.push_back(std::move(arg));
    }
    if (options.max_pushes_per_step > 0) {
      args.push_back(absl::StrCat("--max_pushes_per_step=", options.max_pushes_per_step));
    }
    CONVOY_ASSIGN_OR_RETURN(ChildProcess ps, ChildProcess::Start(args, ps_options));
    ps_.push_back(std::move(ps));
    absl::StatusOr<int> port = WaitForPort(port_file, ps_.back(), options.ps_start_timeout);
    if (!port.ok()) {
      return absl::Status(port.status().code(),
                          absl::StrCat(port.status().message(), " (", ps_options.log_path, ")"));
    }
    addresses.push_back(absl::StrCat(kLocalRunHost, ":", *port));
    agent::PsClientOptions client_options;
    client_options.address = addresses.back();
    client_options.agent_id = "convoy_train";
    client_options.model_fingerprint = model.fingerprint;
    if (shards > 1) {
      client_options.num_shards = static_cast<uint32_t>(shards);
      client_options.shard_index = static_cast<uint32_t>(i);
      client_options.shard_map_digest = map.digest;
    }
    client_options.retry_for = kPsClientRetryFor;
    client_options.security.insecure = false;
    client_options.security.tls_ca_file = credentials_.cert;
    client_options.security.auth_token = credentials_.token;
    CONVOY_ASSIGN_OR_RETURN(std::unique_ptr<agent::PsClient> client,
                            agent::PsClient::Create(client_options));
    clients_.push_back(std::move(client));
    shard_begins_.push_back(map.ranges[i].begin);
  }
  address_ = absl::StrJoin(addresses, ",");
  return absl::OkStatus();
}

LocalCluster::LocalCluster(LocalClusterOptions options, Credentials credentials)
    : options_(std::move(options)), credentials_(std::move(credentials)) {}

LocalCluster::~LocalCluster() {
  if (!stopped_) Stop(absl::Seconds(10));
}

absl::Status LocalCluster::StartAgents() {
  for (int i = 0; i < options_.agents; ++i) {
    CONVOY_ASSIGN_OR_RETURN(
        ChildProcess agent,
        StartAgent(i, options_.max_time, options_.max_steps_per_agent, options_.resume));
    agents_.push_back(std::move(agent));
  }
  progress_.resize(agents_.size());
  counted_before_.resize(agents_.size());
  return absl::OkStatus();
}

absl::StatusOr<ChildProcess> LocalCluster::StartAgent(int i, absl::Duration max_time,
                                                      uint64_t max_steps, bool resume) {
  const std::string bin = options_.bin_dir.empty() ? ExecutableDirectory() : options_.bin_dir;
  AgentSettings settings = options_;
  if (settings.torch_threads == 0) {
    settings.torch_threads =
        std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / options_.agents);
  }
  const std::string log_dir = AgentLogDir(options_, i);
  std::filesystem::create_directories(log_dir);
  ChildProcess::Options child;
  child.log_path = log_dir + "/agent.log";
  child.pipe_stdout = true;
  std::vector<std::string> args = {
      bin + "/convoy_agent",
      "--ps=" + address_,
      absl::StrCat("--agent_id=agent-", i),
      absl::StrCat("--agent_index=", i),
      absl::StrCat("--seed=", options_.seed + i),
      absl::StrCat("--max_minutes=", absl::ToDoubleMinutes(max_time)),
      absl::StrCat("--max_steps=", max_steps),
      "--log_dir=" + log_dir,
      "--machine_progress",
      "--scenario=" + options_.scenario,
      absl::StrCat("--report_seconds=", absl::ToDoubleSeconds(options_.report_every)),
      "--tls_ca=" + credentials_.cert,
      "--auth_token_file=" + credentials_.token_file};
  for (std::string& arg : AgentSettingArgs(settings)) args.push_back(std::move(arg));
  const std::string name = absl::StrCat("agent-", i);
  if (options_.metrics) std::filesystem::remove(LocalRunMetricsPortFile(options_.run_dir, name));
  for (std::string& arg : MetricsArgs(options_, name)) args.push_back(std::move(arg));
  if (options_.replay_checkpoints) {
    const std::string replay_dir = options_.run_dir + "/replay";
    std::filesystem::create_directories(replay_dir);
    args.push_back("--replay_checkpoint_dir=" + replay_dir);
    if (resume) args.push_back("--resume");
  }
  if (options_.max_epoch_runtime_sec.has_value()) {
    args.push_back(absl::StrCat("--max_epoch_runtime_sec=", *options_.max_epoch_runtime_sec));
  }
  return ChildProcess::Start(args, child);
}

absl::Status LocalCluster::RestartAgents(int signal, absl::Duration timeout,
                                         absl::Duration remaining) {
  SignalAgents(signal);
  for (size_t i = 0; i < agents_.size(); ++i) {
    if (!agents_[i].Wait(timeout).has_value()) {
      agents_[i].Signal(SIGKILL);
      agents_[i].Wait(absl::Seconds(10));
    }
    // Its last PROGRESS lines, then its pipe's end (an exited agent's comes at once).
    for (int polls = 0; polls < 100 && !progress_[i].closed; ++polls) {
      Poll(absl::Milliseconds(50));
    }
    if (!options_.replay_checkpoints && progress_[i].latest.has_value()) {
      counted_before_[i].episodes += progress_[i].latest->episodes;
      counted_before_[i].env_steps += progress_[i].latest->env_steps;
      counted_before_[i].train_steps += progress_[i].latest->train_steps;
      counted_before_[i].time += progress_[i].latest->time;
      counted_before_[i].wall_s += progress_[i].latest->wall_s;
    }
  }
  for (size_t i = 0; i < agents_.size(); ++i) {
    // Steps are the run's: a resumed agent counts its own from before, one started empty is given
    // the rest.
    uint64_t max_steps = options_.max_steps_per_agent;
    if (max_steps > 0 && !options_.replay_checkpoints) {
      max_steps =
          std::max<uint64_t>(1, max_steps - std::min(max_steps - 1, counted_before_[i].env_steps));
    }
    CONVOY_ASSIGN_OR_RETURN(agents_[i],
                            StartAgent(static_cast<int>(i), remaining, max_steps, /*resume=*/true));
    progress_[i] = AgentProgress{};
  }
  return WriteMetricsTargets();
}

absl::Status LocalCluster::WriteMetricsTargets() {
  if (!options_.metrics) return absl::OkStatus();
  // One target group per process. The job is the target's; the shard and agent labels are the
  // metrics' own (a target label of the same name would rename them exported_*).
  std::vector<std::string> groups;
  auto add = [&](ChildProcess& process, const std::string& name, const std::string& labels) {
    absl::StatusOr<int> port = WaitForPort(LocalRunMetricsPortFile(options_.run_dir, name), process,
                                           options_.ps_start_timeout, name);
    if (!port.ok()) return port.status();
    groups.push_back(absl::StrCat("  {\"targets\": [\"", kLocalRunHost, ":", *port,
                                  "\"], \"labels\": {", labels, "}}"));
    return absl::OkStatus();
  };
  for (size_t i = 0; i < ps_.size(); ++i) {
    CONVOY_RETURN_IF_ERROR(add(ps_[i], absl::StrCat("ps-", i), "\"job\": \"convoy-ps\""));
  }
  for (size_t i = 0; i < agents_.size(); ++i) {
    CONVOY_RETURN_IF_ERROR(add(agents_[i], absl::StrCat("agent-", i), "\"job\": \"convoy-agent\""));
  }
  // Prometheus rereads the file when it changes: it must never see half of it.
  return WriteFileAtomically(LocalRunMetricsTargets(options_.run_dir),
                             absl::StrCat("[\n", absl::StrJoin(groups, ",\n"), "\n]\n"), 0644);
}

int LocalCluster::Poll(absl::Duration timeout) {
  std::vector<pollfd> fds;
  // A pipe at end of file is left out (fd -1) so that poll() does not return at once for it.
  for (size_t i = 0; i < agents_.size(); ++i) {
    fds.push_back({progress_[i].closed ? -1 : agents_[i].stdout_fd(), POLLIN, 0});
  }
  if (::poll(fds.data(), fds.size(), static_cast<int>(absl::ToInt64Milliseconds(timeout))) > 0) {
    char buffer[4096];
    for (size_t i = 0; i < fds.size(); ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP))) continue;
      AgentProgress& p = progress_[i];
      const ssize_t n = ::read(fds[i].fd, buffer, sizeof(buffer));
      if (n == 0) p.closed = true;
      if (n <= 0) continue;
      p.partial.append(buffer, static_cast<size_t>(n));
      size_t newline;
      while ((newline = p.partial.find('\n')) != std::string::npos) {
        const std::string line = p.partial.substr(0, newline);
        p.partial.erase(0, newline + 1);
        if (!IsProgressLine(line)) continue;
        // A malformed line is said and skipped: the agent's previous report stands.
        if (absl::StatusOr<ProgressRecord> record = ParseProgress(line); record.ok()) {
          p.latest = *std::move(record);
        } else {
          LOG(WARNING) << "agent-" << i << ": " << record.status();
        }
      }
    }
  }
  int running = 0;
  for (ChildProcess& a : agents_) running += a.running() ? 1 : 0;
  return running;
}

ClusterTotals LocalCluster::Totals() const {
  ClusterTotals t;
  for (size_t i = 0; i < progress_.size(); ++i) {
    const ProgressRecord& before = counted_before_[i];
    t.episodes += static_cast<double>(before.episodes);
    t.env_steps += static_cast<double>(before.env_steps);
    t.train_steps += static_cast<double>(before.train_steps);
    t.time += before.time;
    t.wall_seconds += before.wall_s;
    if (!progress_[i].latest.has_value()) continue;
    const ProgressRecord& r = *progress_[i].latest;
    ++t.reporting;
    t.episodes += static_cast<double>(r.episodes);
    t.env_steps += static_cast<double>(r.env_steps);
    t.train_steps += static_cast<double>(r.train_steps);
    t.time += r.time;
    t.wall_seconds += r.wall_s;
    t.env_steps_per_s += r.env_sps;
    t.train_steps_per_s += r.train_sps;
    t.avg_return += r.avg_return;
    t.epsilon += r.epsilon;
  }
  if (t.reporting > 0) {
    t.avg_return /= t.reporting;
    t.epsilon /= t.reporting;
  }
  return t;
}

void LocalCluster::SignalAgents(int signal) {
  for (ChildProcess& a : agents_) a.Signal(signal);
}

int LocalCluster::WaitForAgents(absl::Duration timeout) {
  int failed = 0;
  for (size_t i = 0; i < agents_.size(); ++i) {
    const std::optional<int> code = agents_[i].Wait(timeout);
    if (code != 0) {
      ++failed;
      LOG(ERROR) << "agent-" << i << " exited with " << (code ? *code : -1) << "; see "
                 << AgentLogDir(options_, static_cast<int>(i)) << "/agent.log";
    }
  }
  return failed;
}

absl::StatusOr<agent::PullResult> LocalCluster::PullWeights(std::vector<float>* weights,
                                                            v1::Network network) {
  if (clients_.size() == 1) return clients_[0]->Pull(0, 0, network, weights);
  agent::PullResult assembled;
  assembled.updated = true;
  std::vector<float> slice;
  for (size_t i = 0; i < clients_.size(); ++i) {
    CONVOY_ASSIGN_OR_RETURN(const agent::PullResult pulled,
                            clients_[i]->Pull(0, 0, network, &slice));
    weights->resize(shard_begins_[i]);
    weights->insert(weights->end(), slice.begin(), slice.end());
    assembled.version += pulled.version;
    if (i == 0) assembled.incarnation = pulled.incarnation;
  }
  return assembled;
}

uint64_t LocalCluster::PsVersion() {
  uint64_t sum = 0;
  for (const auto& client : clients_) {
    absl::StatusOr<v1::StatusResponse> status = client->Status();
    if (!status.ok()) return 0;
    sum += status->version();
  }
  return sum;
}

absl::StatusOr<v1::StatusResponse> LocalCluster::PsStatus(int shard) {
  if (shard < 0 || shard >= static_cast<int>(clients_.size())) {
    return absl::OutOfRangeError(
        absl::StrCat("shard ", shard, " of a run with ", clients_.size(), " shards"));
  }
  return clients_[shard]->Status();
}

std::optional<int> LocalCluster::Stop(absl::Duration timeout) {
  stopped_ = true;
  bool any_running = false;
  for (ChildProcess& a : agents_) any_running |= a.running();
  if (any_running) {
    SignalAgents(SIGTERM);
    for (ChildProcess& a : agents_) {
      if (!a.Wait(timeout).has_value()) {
        a.Signal(SIGKILL);
        a.Wait(absl::Seconds(5));
      }
    }
  }
  if (ps_.empty()) return std::nullopt;
  for (ChildProcess& ps : ps_) ps.Signal(SIGTERM);
  std::optional<int> worst = 0;
  for (ChildProcess& ps : ps_) {
    const std::optional<int> code = ps.Wait(timeout);
    if (!code.has_value()) {
      worst = std::nullopt;
    } else if (worst.has_value() && *code != 0) {
      worst = code;
    }
  }
  return worst;
}

uint64_t LocalAverageHorizon(absl::Duration training) {
  const double minutes = absl::ToDoubleMinutes(training);
  const double horizon =
      std::round(minutes * static_cast<double>(run_defaults::kLocalAverageHorizonPerMinute));
  return horizon < 1 ? 1 : static_cast<uint64_t>(horizon);
}

}  // namespace convoy::deploy
