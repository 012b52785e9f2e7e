#include "agent/client/ps_transport.h"

#include <glog/logging.h>
#include <unistd.h>

#include <future>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/model/model_registry.h"
#include "common/model/shard_map.h"
#include "common/settings/run_settings.h"
#include "common/support/files.h"
#include "common/support/status_macros.h"

namespace convoy::agent {
namespace {

std::string Hostname() {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  return host;
}

}  // namespace

absl::StatusOr<std::unique_ptr<PsTransport>> PsTransport::Create(
    const PsTransportOptions& options, std::shared_ptr<SyncObserver> observer) {
  PsClientOptions ps;
  ps.address = options.address;
  ps.agent_id = options.agent_id;
  ps.hostname = Hostname();
  ps.agent_index = options.agent_index;
  ps.push_encoding = options.push_encoding;
  ps.call_timeout = options.call_timeout;
  ps.retry_for = options.join_for;  // Joining at start waits for a server that is still starting.
  ps.security = options.security;
  CONVOY_ASSIGN_OR_RETURN(std::unique_ptr<PsClient> client, PsClient::Create(ps));
  return std::unique_ptr<PsTransport>(
      new PsTransport(options, std::move(client), std::move(observer)));
}

PsTransport::PsTransport(const PsTransportOptions& options, std::unique_ptr<PsClient> client,
                         std::shared_ptr<SyncObserver> observer)
    : options_(options), observer_(std::move(observer)), ps_(std::move(client)) {}

absl::StatusOr<JoinResult> PsTransport::Join(int num_actions, const JoinOptions& options) {
  // The model first: Join needs its fingerprint.
  CONVOY_ASSIGN_OR_RETURN(const v1::StatusResponse status, ps_->Status());
  const std::set<std::string> pinned =
      options.model_pinned ? std::set<std::string>{"model"} : std::set<std::string>{};
  RunSettingAdopter adopt(pinned);
  std::string model_name = options.model;
  if (!status.model_name().empty()) adopt.Take("model", &model_name, status.model_name());
  CONVOY_RETURN_IF_ERROR(adopt.status());
  CONVOY_ASSIGN_OR_RETURN(const ModelInfo model, DescribeModel(model_name, num_actions));
  ps_->set_model_fingerprint(model.fingerprint);
  CONVOY_ASSIGN_OR_RETURN(const ShardMap map, MakeShardMap(model, options_.num_shards));
  if (options_.num_shards > 1) {
    ps_->set_shard(options_.num_shards, options_.shard_index, map.digest);
  }
  begin_ = map.ranges[options_.shard_index].begin;
  end_ = map.ranges[options_.shard_index].end;
  CONVOY_ASSIGN_OR_RETURN(v1::JoinResponse joined, ps_->Join());
  CONVOY_ASSIGN_OR_RETURN(const UpdateRule rule, ParseUpdateRule(joined.config().update_rule()));
  CONVOY_RETURN_IF_ERROR(CheckPushModeFits(options.push, rule));
  server_target_version_ = joined.target_version();
  JoinResult result;
  result.epsilon = joined.config().epsilon();
  result.config = std::move(*joined.mutable_config());
  return result;
}

void PsTransport::StartTraining() {
  PsClientOptions training = ps_->options();
  training.retry_for = options_.retry_while_training;
  training.connect_timeout = options_.connect_timeout;
  ps_ = *PsClient::Create(training);  // The same credentials just worked.
  training.retry_for = absl::ZeroDuration();
  training.call_timeout = options_.rejoin_timeout;
  rejoin_ = *PsClient::Create(training);
}

absl::StatusOr<PushAnswer> PsTransport::Push(absl::Span<const float> values, uint32_t minibatches) {
  const absl::Time start = absl::Now();
  absl::StatusOr<PushAnswer> pushed =
      ps_->Push(values.data(), values.size(), version_, minibatches, incarnation_);
  if (observer_ != nullptr)
    observer_->Pushed(options_.shard_index, absl::Now() - start, pushed.ok());
  return Pushed(std::move(pushed), minibatches);
}

ServerTransport::Exchange PsTransport::PushThenPull(absl::Span<const float> values,
                                                    uint32_t minibatches,
                                                    std::vector<float>* online,
                                                    std::vector<float>* target,
                                                    bool whatever_held) {
  Exchange exchange;
  const absl::Time start = absl::Now();
  PsClient::PushPull done = ps_->PushThenPull(
      values.data(), values.size(), version_, minibatches, incarnation_,
      whatever_held ? 0 : version_, whatever_held ? 0 : incarnation_, v1::NETWORK_ONLINE, online);
  // The pull's time is what it took after the answer: the weights were on their way before.
  exchange.push_time = absl::Now() - start;
  if (observer_ != nullptr) {
    observer_->Pushed(options_.shard_index, exchange.push_time, done.pushed.ok());
  }
  exchange.pushed = Pushed(std::move(done.pushed), minibatches);
  if (exchange.pushed.ok() && done.pulled.has_value()) {
    const absl::Time pull_start = absl::Now();
    exchange.pulled = Pulled(std::move(*done.pulled), target);
    exchange.pull_time = absl::Now() - pull_start;
    if (observer_ != nullptr) {
      observer_->Pulled(options_.shard_index, exchange.pull_time, exchange.pulled->ok());
    }
  }
  return exchange;
}

absl::StatusOr<PushAnswer> PsTransport::Pushed(absl::StatusOr<PushAnswer> pushed,
                                               uint32_t minibatches) {
  // Only a run with an observer names its pushes: nothing more on every push otherwise.
  if (observer_ != nullptr && (pushed.ok() || ps_->has_pending_push())) {
    const LoggedPush logged{options_.agent_id,
                            ps_->push_session(),
                            ps_->next_sequence() - 1,
                            options_.shard_index,
                            minibatches,
                            incarnation_,
                            version_};
    if (pushed.ok()) {
      observer_->Answered(logged, *pushed);
    } else {
      pending_logged_ = logged;
    }
  }
  if (pushed.ok()) server_target_version_ = pushed->target_version;
  return pushed;
}

absl::StatusOr<PullUpdate> PsTransport::Pull(std::vector<float>* online, std::vector<float>* target,
                                             bool whatever_held) {
  const absl::Time start = absl::Now();
  absl::StatusOr<PullUpdate> pulled =
      Pulled(ps_->Pull(whatever_held ? 0 : version_, whatever_held ? 0 : incarnation_,
                       v1::NETWORK_ONLINE, online),
             target);
  if (observer_ != nullptr)
    observer_->Pulled(options_.shard_index, absl::Now() - start, pulled.ok());
  return pulled;
}

absl::StatusOr<PullUpdate> PsTransport::Pulled(absl::StatusOr<PullResult> pulled,
                                               std::vector<float>* target) {
  if (!pulled.ok()) {
    LOG(WARNING) << options_.agent_id << ": pull failed: " << pulled.status();
    return pulled.status();
  }
  PullUpdate update;
  update.online = pulled->updated;
  const bool new_incarnation = pulled->incarnation != incarnation_;
  version_ = pulled->version;
  incarnation_ = pulled->incarnation;
  if (server_target_version_ != target_version_ || new_incarnation) {
    absl::StatusOr<PullResult> t = ps_->Pull(0, 0, v1::NETWORK_TARGET, target);
    if (t.ok() && t->updated) {
      target_version_ = t->version;
      update.target = true;
    }
  }
  return update;
}

absl::StatusOr<double> PsTransport::Resend() {
  CHECK(rejoin_ != nullptr) << "Resend before StartTraining";
  absl::StatusOr<v1::JoinResponse> joined = rejoin_->Join();
  if (!joined.ok()) {
    VLOG(1) << options_.agent_id << ": rejoin failed: " << joined.status();
    return joined.status();
  }
  LOG(INFO) << options_.agent_id << ": rejoined the parameter server at version "
            << joined->version();
  if (ps_->has_pending_push()) {
    absl::StatusOr<PushAnswer> resent = ps_->ResendPendingPush();
    if (resent.ok() && observer_ != nullptr) {
      observer_->Answered(pending_logged_, *resent);
    }
    LOG(INFO) << options_.agent_id << ": resent the push that got no answer: "
              << (!resent.ok()       ? resent.status().ToString()
                  : resent->repeated ? "the server had applied it already"
                  : resent->accepted ? "applied"
                                     : absl::StrCat("refused, ", resent->message));
    if (ps_->has_pending_push()) {
      return absl::UnavailableError("the server took the Join but not the pushes");
    }
  }
  server_target_version_ = joined->target_version();
  return joined->config().epsilon();
}

absl::StatusOr<std::vector<std::string>> ParseServerList(absl::string_view ps) {
  if (absl::ConsumePrefix(&ps, "@")) {
    const std::string path(ps);
    absl::StatusOr<std::string> contents = ReadFileToString(path);
    if (!contents.ok()) {
      return absl::Status(contents.status().code(),
                          absl::StrCat("--ps=@", path, ": ", contents.status().message()));
    }
    std::vector<std::string> servers;
    int line_number = 0;
    for (absl::string_view line : absl::StrSplit(*contents, '\n')) {
      ++line_number;
      line = line.substr(0, line.find('#'));  // A comment runs to the end of its line.
      for (absl::string_view address : absl::StrSplit(line, absl::ByAnyChar(", \t\r"))) {
        if (address.empty()) continue;
        if (!absl::StrContains(address, ':')) {
          return absl::InvalidArgumentError(absl::StrCat("--ps=@", path, " line ", line_number,
                                                         ": '", address, "' is not host:port"));
        }
        servers.emplace_back(address);
      }
    }
    if (servers.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--ps=@", path, " lists no server: give one host:port per line, in shard order"));
    }
    return servers;
  }
  std::vector<std::string> servers = absl::StrSplit(ps, ',');
  for (const std::string& s : servers) {
    if (s.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--ps '", ps,
                       "' has an empty address: give host:port, or host:port,host:port,... in "
                       "shard order for a sharded server, or @FILE"));
    }
  }
  return servers;
}

absl::StatusOr<std::vector<std::unique_ptr<ServerTransport>>> CreateTransports(
    const std::vector<std::string>& servers, const PsTransportOptions& common,
    std::shared_ptr<SyncObserver> observer) {
  std::vector<std::unique_ptr<ServerTransport>> transports;
  for (size_t i = 0; i < servers.size(); ++i) {
    PsTransportOptions o = common;
    o.address = servers[i];
    o.num_shards = static_cast<uint32_t>(servers.size());
    o.shard_index = static_cast<uint32_t>(i);
    CONVOY_ASSIGN_OR_RETURN(std::unique_ptr<PsTransport> transport,
                            PsTransport::Create(o, observer));
    transports.push_back(std::move(transport));
  }
  return transports;
}

absl::StatusOr<JoinResult> JoinServers(const std::vector<ServerTransport*>& servers,
                                       int num_actions, const JoinOptions& options) {
  CONVOY_ASSIGN_OR_RETURN(JoinResult joined, servers[0]->Join(num_actions, options));
  // Once, at the start: a thread per further shard for the length of the joins.
  std::vector<std::future<absl::StatusOr<JoinResult>>> others;
  for (size_t i = 1; i < servers.size(); ++i) {
    others.push_back(
        std::async(std::launch::async, [&, i] { return servers[i]->Join(num_actions, options); }));
  }
  absl::Status first_error;
  for (auto& other : others) {
    const absl::StatusOr<JoinResult> j = other.get();
    if (!j.ok() && first_error.ok()) first_error = j.status();
  }
  CONVOY_RETURN_IF_ERROR(first_error);
  return joined;
}

}  // namespace convoy::agent
