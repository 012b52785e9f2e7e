#include "agent/ps_session.h"

#include <glog/logging.h>
#include <unistd.h>

#include <set>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/model_registry.h"
#include "common/run_settings.h"
#include "common/shard_map.h"
#include "common/status_macros.h"

namespace convoy {
namespace {

std::string Hostname() {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  return host;
}

}  // namespace

void RejoinPacer::Attempted(absl::Time now, const absl::Status& outcome) {
  if (outcome.ok()) {
    next_ = absl::InfinitePast();
    return;
  }
  // UNAVAILABLE: no answer came from the server (PsClient's connect failures and lost connections
  // are UNAVAILABLE). Anything else is an answer: late (DEADLINE_EXCEEDED) or a refusal.
  next_ = now + (outcome.code() == absl::StatusCode::kUnavailable ? options_.after_no_answer
                                                                  : options_.after_late_answer);
}

absl::StatusOr<std::unique_ptr<PsSession>> PsSession::Create(const PsSessionOptions& options) {
  PsClientOptions ps;
  ps.address = options.address;
  ps.agent_id = options.agent_id;
  ps.hostname = Hostname();
  ps.agent_index = options.agent_index;
  ps.push_encoding = options.push_encoding;
  ps.retry_for = options.join_for;  // Joining at start waits for a server that is still starting.
  ps.security = options.security;
  CONVOY_ASSIGN_OR_RETURN(std::unique_ptr<PsClient> client, PsClient::Create(ps));
  return std::unique_ptr<PsSession>(new PsSession(options, std::move(client)));
}

PsSession::PsSession(const PsSessionOptions& options, std::unique_ptr<PsClient> client)
    : options_(options),
      ps_(std::move(client)),
      pacer_(RejoinPacer::Options{options.rejoin_retry, options.rejoin_every}) {}

absl::StatusOr<JoinResult> PsSession::Join(int num_actions, const JoinOptions& options) {
  // The model first: Join needs its fingerprint.
  CONVOY_ASSIGN_OR_RETURN(const v1::StatusResponse status, ps_->Status());
  const std::set<std::string> pinned =
      options.model_pinned ? std::set<std::string>{"model"} : std::set<std::string>{};
  RunSettingAdopter adopt(pinned);
  std::string model_name = options.model;
  if (!status.model_name().empty()) adopt.Take("model", "model", &model_name, status.model_name());
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
  state_ = State::kConnected;
  server_target_version_ = joined.target_version();
  JoinResult result;
  result.epsilon = joined.config().epsilon();
  result.config = std::move(*joined.mutable_config());
  return result;
}

void PsSession::StartTraining() {
  PsClientOptions training = ps_->options();
  training.retry_for = options_.retry_while_training;
  training.connect_timeout = options_.connect_timeout;
  ps_ = *PsClient::Create(training);  // The same credentials just worked.
  training.retry_for = absl::ZeroDuration();
  training.call_timeout = options_.rejoin_timeout;
  rejoin_ = *PsClient::Create(training);
}

absl::StatusOr<PushAnswer> PsSession::Push(absl::Span<const float> values,
                                           uint32_t minibatch_count) {
  absl::StatusOr<PushAnswer> pushed =
      ps_->Push(values.data(), values.size(), version_, minibatch_count, incarnation_);
  // Only a run with a push log names its pushes: nothing more on every push otherwise.
  auto logged = [&] {
    return LoggedPush{options_.agent_id,
                      ps_->push_session(),
                      ps_->next_sequence() - 1,
                      options_.shard_index,
                      minibatch_count,
                      incarnation_,
                      version_};
  };
  if (pushed.ok() && options_.push_log != nullptr) options_.push_log->Answered(logged(), *pushed);
  if (!pushed.ok()) {
    if (ps_->has_pending_push()) {
      if (options_.push_log != nullptr) pending_logged_ = logged();
      // No answer: the client keeps this push and resends it under its number on rejoin, so the
      // server applies it once whether or not it already did.
      Disconnected(state_ == State::kRejoining
                       ? absl::UnavailableError("the server took the Join but not the pushes")
                       : pushed.status());
    }
    return pushed.status();
  }
  server_target_version_ = pushed->target_version;
  return pushed;
}

absl::StatusOr<PullUpdate> PsSession::Pull(std::vector<float>* online, std::vector<float>* target) {
  absl::StatusOr<PullResult> pulled = ps_->Pull(version_, incarnation_, v1::NETWORK_ONLINE, online);
  if (!pulled.ok()) {
    LOG(WARNING) << options_.agent_id << ": pull failed: " << pulled.status();
    if (pulled.status().code() == absl::StatusCode::kUnavailable) state_ = State::kDisconnected;
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

void PsSession::Disconnected(const absl::Status& why) {
  LOG(WARNING) << options_.agent_id << ": parameter server unreachable (" << why.message()
               << "); learning locally until it is back";
  state_ = State::kDisconnected;
  pacer_.Lost(absl::Now());
}

bool PsSession::rejoin_due() const {
  return state_ == State::kDisconnected && pacer_.Due(absl::Now());
}

absl::StatusOr<double> PsSession::Rejoin(RejoinPace pace) {
  CHECK(rejoin_ != nullptr) << "Rejoin before StartTraining";
  switch (pace) {
    case RejoinPace::kPaced:
      if (!pacer_.Due(absl::Now())) {
        return absl::UnavailableError("the next rejoin attempt is not due yet");
      }
      break;
    case RejoinPace::kNow:
      break;
  }
  absl::StatusOr<double> rejoined = TryRejoin();
  pacer_.Attempted(absl::Now(), rejoined.status());
  return rejoined;
}

absl::StatusOr<double> PsSession::TryRejoin() {
  absl::StatusOr<v1::JoinResponse> joined = rejoin_->Join();
  if (!joined.ok()) {
    VLOG(1) << options_.agent_id << ": rejoin failed: " << joined.status();
    return joined.status();
  }
  LOG(INFO) << options_.agent_id << ": rejoined the parameter server at version "
            << joined->version();
  if (ps_->has_pending_push()) {
    absl::StatusOr<PushAnswer> resent = ps_->ResendPendingPush();
    if (resent.ok() && options_.push_log != nullptr) {
      options_.push_log->Answered(pending_logged_, *resent);
    }
    LOG(INFO) << options_.agent_id << ": resent the push that got no answer: "
              << (!resent.ok()       ? resent.status().ToString()
                  : resent->repeated ? "the server had applied it already"
                  : resent->accepted ? "applied"
                                     : absl::StrCat("refused, ", resent->message));
    if (ps_->has_pending_push()) {
      const absl::Status why =
          absl::UnavailableError("the server took the Join but not the pushes");
      Disconnected(why);
      return why;
    }
  }
  state_ = State::kRejoining;
  server_target_version_ = joined->target_version();
  return joined->config().epsilon();
}

void PsSession::Reconnected() {
  state_ = State::kConnected;
  incarnation_ = 0;  // Whatever we hold, take the server's weights.
}

}  // namespace convoy
