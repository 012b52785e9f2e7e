#include "agent/ps_session.h"

#include <glog/logging.h>
#include <unistd.h>

#include <set>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/model_registry.h"
#include "common/shard_map.h"

namespace convoy {
namespace {

std::string Hostname() {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  return host;
}

// Adopts the server's value of one run setting, or refuses it when the user pinned a different one.
class RunConfigAdopter {
 public:
  explicit RunConfigAdopter(const std::set<std::string>& pinned) : pinned_(pinned) {}

  // `flag` is the agent's flag, `server_flag` the convoy_ps flag that sets the server's value.
  template <typename T, typename U>
  void Take(const char* flag, const char* server_flag, T* mine, const U& server) {
    const T theirs = static_cast<T>(server);
    if (*mine == theirs || !status_.ok()) return;
    if (pinned_.count(flag) > 0) {
      status_ = absl::InvalidArgumentError(
          absl::StrCat("--", flag, "=", Show(*mine), " disagrees with the parameter server's ",
                       Show(theirs), ": the server owns it for the whole run. Drop --", flag,
                       " (the agent adopts the server's value), or start convoy_ps with --",
                       server_flag, "=", Show(*mine)));
      return;
    }
    adopted_.push_back(absl::StrCat(flag, "=", Show(theirs), " (alone: ", Show(*mine), ")"));
    *mine = theirs;
  }

  const absl::Status& status() const { return status_; }
  const std::vector<std::string>& adopted() const { return adopted_; }

 private:
  template <typename T>
  static std::string Show(const T& value) {
    if constexpr (std::is_same_v<T, bool>) {
      return value ? "true" : "false";
    } else {
      return absl::StrCat(value);
    }
  }

  const std::set<std::string>& pinned_;
  absl::Status status_;
  std::vector<std::string> adopted_;
};

// Takes every run setting `config` carries into *options.
absl::Status AdoptRunConfig(const v1::RunConfig& config, RunConfigAdopter* adopt,
                            AgentOptions* options) {
  if (config.batch_size() > 0) {
    adopt->Take("batch_size", "batch_size", &options->batch_size, config.batch_size());
  }
  if (config.batch_update_frequency() > 0) {
    adopt->Take("batch_update_frequency", "batch_update_frequency",
                &options->batch_update_frequency, config.batch_update_frequency());
  }
  adopt->Take("gamma", "gamma", &options->gamma, config.gamma());
  if (config.target_update_frequency() > 0) {
    adopt->Take("target_update_frequency", "target_update_frequency",
                &options->target_update_frequency, config.target_update_frequency());
  }
  if (config.learning_rate() > 0) {
    adopt->Take("learning_rate", "learning_rate", &options->learning_rate, config.learning_rate());
  }
  adopt->Take("min_epsilon", "min_epsilon", &options->min_epsilon, config.min_epsilon());
  adopt->Take("per_iter_epsilon_reduction", "per_iter_epsilon_reduction",
              &options->per_iter_epsilon_reduction, config.per_iter_epsilon_reduction());
  // Fields a server that predates them does not send: the agent's own values stand.
  if (config.has_n_step()) adopt->Take("n_step", "n_step", &options->n_step, config.n_step());
  if (config.has_double_dqn()) {
    adopt->Take("double_dqn", "double_dqn", &options->double_dqn, config.double_dqn());
  }
  if (config.has_learner_max_grad_norm()) {
    adopt->Take("max_grad_norm", "learner_max_grad_norm", &options->max_grad_norm,
                config.learner_max_grad_norm());
  }
  if (config.has_prioritized()) {
    adopt->Take("prioritized", "prioritized", &options->prioritized, config.prioritized());
  }
  if (config.has_mirror_augmentation()) {
    adopt->Take("mirror_augmentation", "mirror_augmentation", &options->mirror_augmentation,
                config.mirror_augmentation());
  }
  return adopt->status();
}

}  // namespace

absl::StatusOr<UpdateRule> ParseUpdateRule(absl::string_view name) {
  if (name == "gradients") return UpdateRule::kGradients;
  if (name == "delta") return UpdateRule::kDelta;
  return absl::InvalidArgumentError(absl::StrCat("the parameter server's update rule is '", name,
                                                 "', neither gradients nor delta"));
}

absl::Status CheckPushModeFits(PushMode push, UpdateRule rule) {
  switch (rule) {
    case UpdateRule::kDelta:
      switch (push) {
        case PushMode::kDeltas:
          return absl::OkStatus();
        case PushMode::kGradients:
          return absl::InvalidArgumentError(
              "the parameter server applies deltas (--optimizer=delta): start agents with "
              "--push=deltas");
      }
      break;
    case UpdateRule::kGradients:
      switch (push) {
        case PushMode::kGradients:
          return absl::OkStatus();
        case PushMode::kDeltas:
          return absl::InvalidArgumentError(
              "--push=deltas needs a parameter server started with --optimizer=delta");
      }
      break;
  }
  return absl::InternalError("unknown push mode or update rule");  // Unreachable.
}

PsSessionOptions PsSession::OptionsFor(const AgentOptions& agent) {
  PsSessionOptions o;
  o.address = agent.ps_address;
  o.agent_id = agent.agent_id;
  o.agent_index = agent.agent_index;
  o.push_encoding = agent.push_encoding;
  o.security = agent.ps_security;
  return o;
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
  absl::StatusOr<std::unique_ptr<PsClient>> client = PsClient::Create(ps);
  if (!client.ok()) return client.status();
  return std::unique_ptr<PsSession>(new PsSession(options, *std::move(client)));
}

PsSession::PsSession(const PsSessionOptions& options, std::unique_ptr<PsClient> client)
    : options_(options), ps_(std::move(client)) {}

absl::StatusOr<double> PsSession::Join(int num_actions, AgentOptions* options) {
  // The model first: Join needs its fingerprint.
  absl::StatusOr<v1::StatusResponse> status = ps_->Status();
  if (!status.ok()) return status.status();
  RunConfigAdopter adopt(options->pinned);
  if (!status->model_name().empty()) {
    adopt.Take("model", "model", &options->model, status->model_name());
  }
  if (!adopt.status().ok()) return adopt.status();
  absl::StatusOr<ModelInfo> model = DescribeModel(options->model, num_actions);
  if (!model.ok()) return model.status();
  ps_->set_model_fingerprint(model->fingerprint);
  absl::StatusOr<ShardMap> map = MakeShardMap(*model, options_.num_shards);
  if (!map.ok()) return map.status();
  if (options_.num_shards > 1) {
    ps_->set_shard(options_.num_shards, options_.shard_index, map->digest);
  }
  begin_ = map->ranges[options_.shard_index].begin;
  end_ = map->ranges[options_.shard_index].end;
  absl::StatusOr<v1::JoinResponse> joined = ps_->Join();
  if (!joined.ok()) return joined.status();
  const v1::RunConfig& config = joined->config();
  absl::StatusOr<UpdateRule> rule = ParseUpdateRule(config.update_rule());
  if (!rule.ok()) return rule.status();
  if (absl::Status s = CheckPushModeFits(options->push, *rule); !s.ok()) return s;
  if (absl::Status s = AdoptRunConfig(config, &adopt, options); !s.ok()) return s;
  LOG(INFO) << options_.agent_id << ": run settings of the parameter server at " << options_.address
            << (adopt.adopted().empty()
                    ? ": all equal to this agent's"
                    : absl::StrCat(", adopted: ", absl::StrJoin(adopt.adopted(), ", ")));
  state_ = State::kConnected;
  server_target_version_ = joined->target_version();
  return config.epsilon();
}

void PsSession::StartTraining() {
  PsClientOptions training = ps_->options();
  training.retry_for = options_.retry_while_training;
  ps_ = *PsClient::Create(training);  // The same credentials just worked.
  training.retry_for = absl::ZeroDuration();
  training.call_timeout = options_.rejoin_timeout;
  rejoin_ = *PsClient::Create(training);
}

absl::StatusOr<PushResult> PsSession::Push(absl::Span<const float> values,
                                           uint32_t minibatch_count) {
  absl::StatusOr<PushResult> pushed =
      ps_->Push(values.data(), values.size(), version_, minibatch_count, incarnation_);
  if (!pushed.ok()) {
    if (ps_->has_pending_push()) {
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
  next_rejoin_ = absl::Now() + options_.rejoin_every;
}

absl::StatusOr<double> PsSession::Rejoin(RejoinPace pace) {
  CHECK(rejoin_ != nullptr) << "Rejoin before StartTraining";
  switch (pace) {
    case RejoinPace::kPaced:
      if (absl::Now() < next_rejoin_) {
        return absl::UnavailableError("the next rejoin attempt is not due yet");
      }
      break;
    case RejoinPace::kNow:
      break;
  }
  next_rejoin_ = absl::Now() + options_.rejoin_every;
  absl::StatusOr<v1::JoinResponse> joined = rejoin_->Join();
  if (!joined.ok()) {
    VLOG(1) << options_.agent_id << ": rejoin failed: " << joined.status();
    return joined.status();
  }
  LOG(INFO) << options_.agent_id << ": rejoined the parameter server at version "
            << joined->version();
  if (ps_->has_pending_push()) {
    absl::StatusOr<PushResult> resent = ps_->ResendPendingPush();
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
