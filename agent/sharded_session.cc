#include "agent/sharded_session.h"

#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <future>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/files.h"
#include "common/status_macros.h"

namespace convoy {
namespace {

// Runs call(i) for every shard at once, the first on the calling thread, and waits for all.
template <typename Call>
auto ForEachShard(size_t n, Call call) {
  using Result = decltype(call(size_t{0}));
  std::vector<std::future<Result>> others;
  for (size_t i = 1; i < n; ++i) others.push_back(std::async(std::launch::async, call, i));
  std::vector<Result> results;
  results.reserve(n);
  if (n > 0) results.push_back(call(0));
  for (auto& r : others) results.push_back(r.get());
  return results;
}

}  // namespace

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

absl::StatusOr<std::unique_ptr<ParameterServerSession>> CreateSession(
    const std::vector<std::string>& servers, const PsSessionOptions& common, PushMode push) {
  if (servers.size() == 1) {
    PsSessionOptions o = common;
    o.address = servers[0];
    CONVOY_ASSIGN_OR_RETURN(std::unique_ptr<PsSession> one, PsSession::Create(o));
    return std::unique_ptr<ParameterServerSession>(std::move(one));
  }
  std::vector<PsSessionOptions> shards;
  for (size_t i = 0; i < servers.size(); ++i) {
    PsSessionOptions o = common;
    o.address = servers[i];
    o.num_shards = static_cast<uint32_t>(servers.size());
    o.shard_index = static_cast<uint32_t>(i);
    shards.push_back(o);
  }
  CONVOY_ASSIGN_OR_RETURN(std::unique_ptr<ShardedSession> sharded,
                          ShardedSession::Create(shards, push));
  return std::unique_ptr<ParameterServerSession>(std::move(sharded));
}

absl::StatusOr<std::unique_ptr<ShardedSession>> ShardedSession::Create(
    const std::vector<PsSessionOptions>& shards, PushMode push) {
  std::vector<std::unique_ptr<ServerSession>> sessions;
  for (const PsSessionOptions& o : shards) {
    CONVOY_ASSIGN_OR_RETURN(std::unique_ptr<PsSession> session, PsSession::Create(o));
    sessions.push_back(std::move(session));
  }
  return std::unique_ptr<ShardedSession>(new ShardedSession(std::move(sessions), push));
}

ShardedSession::ShardedSession(std::vector<std::unique_ptr<ServerSession>> shards, PushMode push)
    : shards_(std::move(shards)),
      rejoin_(shards_.size()),
      backlog_(shards_.size(), OutageBacklog(push)),
      online_(shards_.size()),
      target_(shards_.size()) {}

bool ShardedSession::RejoinEnded(size_t shard, bool wait) {
  std::future<absl::StatusOr<double>>& attempt = rejoin_[shard];
  if (!attempt.valid()) return false;
  if (!wait && attempt.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return false;
  const absl::StatusOr<double> back = attempt.get();
  if (!back.ok()) return false;
  if (shard == 0) epsilon_ = *back;
  return true;
}

absl::Status ShardedSession::PushBacklog(size_t shard) {
  if (backlog_[shard].empty()) return absl::OkStatus();
  std::vector<float> owed;
  const uint32_t minibatches =
      static_cast<uint32_t>(std::min<uint64_t>(backlog_[shard].Take(&owed), UINT32_MAX));
  // Once sent it is the shard's: answered, or kept by its session under its number and resent on
  // the next rejoin.
  absl::StatusOr<PushAnswer> pushed = shards_[shard]->Push(owed, minibatches);
  if (!pushed.ok()) {
    if (!shards_[shard]->rejoining())
      return pushed.status();  // Away again; its session resends it.
    LOG(ERROR) << "shard " << shard << " refused the " << minibatches
               << " minibatches it missed: " << pushed.status();
    return absl::OkStatus();
  }
  LOG(INFO) << "shard " << shard << " is back; pushed the " << minibatches
            << " minibatches it missed: "
            << (pushed->accepted ? "applied" : absl::StrCat("refused, ", pushed->message));
  return absl::OkStatus();
}

absl::StatusOr<JoinResult> ShardedSession::Join(int num_actions, const JoinOptions& options) {
  // Shard 0 first: its run settings and epsilon are the run's; the others then join with the same
  // model, which they serve too.
  CONVOY_ASSIGN_OR_RETURN(JoinResult joined, shards_[0]->Join(num_actions, options));
  const std::vector<absl::StatusOr<JoinResult>> others = ForEachShard(
      shards_.size() - 1, [&](size_t i) { return shards_[i + 1]->Join(num_actions, options); });
  for (const absl::StatusOr<JoinResult>& j : others) {
    CONVOY_RETURN_IF_ERROR(j.status());
  }
  model_parameter_count_ = shards_.back()->end();
  epsilon_ = joined.epsilon;
  return joined;
}

void ShardedSession::StartTraining() {
  for (auto& s : shards_) s->StartTraining();
}

absl::StatusOr<PushAnswer> ShardedSession::Push(absl::Span<const float> values,
                                                uint32_t minibatch_count) {
  if (values.size() != model_parameter_count_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a push of ", values.size(), " values to a model of ", model_parameter_count_));
  }
  auto range = [&](size_t i) {
    const ServerSession& s = *shards_[i];
    return values.subspan(s.begin(), s.end() - s.begin());
  };
  std::vector<size_t> live;
  for (size_t i = 0; i < shards_.size(); ++i) {
    if (Live(i)) {
      live.push_back(i);
    } else {
      if (backlog_[i].empty()) {
        LOG(WARNING) << "shard " << i
                     << " is away; the others keep training, and what it is owed is "
                     << "kept until it is back";
      }
      backlog_[i].Add(range(i), minibatch_count);
    }
  }
  std::vector<absl::StatusOr<PushAnswer>> pushed = ForEachShard(live.size(), [&](size_t k) {
    return shards_[live[k]]->Push(range(live[k]), minibatch_count);
  });
  // A shard whose push got no answer keeps it and is away from now on; one that refused it (an
  // answer) lost it. Shard 0 speaks for the run (epsilon, target version) when it answered; a push
  // counts as accepted when every shard that answered applied its range.
  std::optional<PushAnswer> result;
  absl::Status first_error = absl::UnavailableError("every shard is away");
  for (size_t k = 0; k < live.size(); ++k) {
    absl::StatusOr<PushAnswer>& p = pushed[k];
    if (!p.ok()) {
      if (first_error.code() == absl::StatusCode::kUnavailable) first_error = p.status();
      continue;
    }
    if (live[k] == 0) epsilon_ = p->epsilon;
    if (!result.has_value()) {
      result = *p;
      continue;
    }
    result->accepted = result->accepted && p->accepted;
    result->staleness = std::max(result->staleness, p->staleness);
    result->repeated = result->repeated || p->repeated;
    if (!p->accepted && result->message.empty()) result->message = p->message;
  }
  if (!result.has_value()) return first_error;
  result->epsilon = epsilon_;
  result->version = version();
  return *result;
}

absl::StatusOr<PullUpdate> ShardedSession::Pull(std::vector<float>* online,
                                                std::vector<float>* target) {
  const bool any_live = connected();
  // Away while others are in step: an attempt to bring a shard back runs on a thread of its own,
  // and this pull takes in those that ended. With every shard away the agent rejoins through
  // Rejoin.
  for (size_t i = 0; i < shards_.size(); ++i) {
    RejoinEnded(i, /*wait=*/false);
    if (any_live && !Live(i) && !rejoin_[i].valid() && shards_[i]->rejoin_due()) {
      rejoin_[i] = std::async(std::launch::async, [shard = shards_[i].get()] {
        return shard->Rejoin(RejoinPace::kPaced);
      });
    }
  }
  std::vector<absl::StatusOr<PullUpdate>> pulled =
      ForEachShard(shards_.size(), [&](size_t i) -> absl::StatusOr<PullUpdate> {
        if (!Live(i)) return absl::UnavailableError(absl::StrCat("shard ", i, " is away"));
        ServerSession& s = *shards_[i];
        if (s.rejoining()) {
          // Back: pay what it is owed, then take its weights.
          if (absl::Status paid = PushBacklog(i); !paid.ok()) return paid;
          s.Reconnected();
        }
        return s.Pull(&online_[i], &target_[i]);
      });
  online->resize(model_parameter_count_);
  target->resize(model_parameter_count_);
  PullUpdate update;
  absl::Status first_error;
  bool any_pulled = false;
  for (size_t i = 0; i < shards_.size(); ++i) {
    if (!pulled[i].ok()) {
      if (first_error.ok()) first_error = pulled[i].status();
      continue;
    }
    any_pulled = true;
    const uint64_t begin = shards_[i]->begin();
    if (pulled[i]->online) {
      std::copy(online_[i].begin(), online_[i].end(), online->begin() + begin);
      update.online = true;
    }
    if (pulled[i]->target) {
      std::copy(target_[i].begin(), target_[i].end(), target->begin() + begin);
      update.target = true;
    }
  }
  // A shard that is away keeps its range as it was; the pull is good when any shard answered.
  if (!any_pulled) return first_error;
  return update;
}

void ShardedSession::Disconnected(const absl::Status& why) {
  for (size_t i = 0; i < shards_.size(); ++i) {
    if (Live(i)) shards_[i]->Disconnected(why);  // An away shard keeps its rejoin schedule.
  }
}

absl::StatusOr<double> ShardedSession::Rejoin(RejoinPace pace) {
  // Every shard is away. One whose own attempt (started by a pull) took is back already; the others
  // try now. Each shard that comes back is also paid what it is owed from before the others went
  // away.
  std::vector<size_t> away;
  std::vector<bool> back_already;
  for (size_t i = 0; i < shards_.size(); ++i) {
    if (RejoinEnded(i, /*wait=*/true)) {
      away.push_back(i);
      back_already.push_back(true);
    } else if (!Live(i)) {
      away.push_back(i);
      back_already.push_back(false);
    }
  }
  const std::vector<absl::StatusOr<double>> rejoined =
      ForEachShard(away.size(), [&](size_t k) -> absl::StatusOr<double> {
        absl::StatusOr<double> back = epsilon_;
        if (!back_already[k]) back = shards_[away[k]]->Rejoin(pace);
        if (!back.ok()) return back;
        if (absl::Status paid = PushBacklog(away[k]); !paid.ok()) return paid;
        return back;
      });
  // Back when any shard is: the catch-up push goes to those, the rest keep their backlogs.
  absl::Status first_error = absl::UnavailableError("no shard was away");
  bool any_back = false;
  for (size_t k = 0; k < away.size(); ++k) {
    if (!rejoined[k].ok()) {
      if (!any_back && first_error.code() == absl::StatusCode::kUnavailable) {
        first_error = rejoined[k].status();
      }
      continue;
    }
    any_back = true;
    if (away[k] == 0) epsilon_ = *rejoined[k];
  }
  if (!any_back) return first_error;
  return epsilon_;
}

void ShardedSession::Reconnected() {
  for (size_t i = 0; i < shards_.size(); ++i) {
    if (Live(i) && shards_[i]->rejoining()) shards_[i]->Reconnected();
  }
}

bool ShardedSession::connected() const {
  for (size_t i = 0; i < shards_.size(); ++i) {
    if (!rejoin_[i].valid() && shards_[i]->connected()) return true;
  }
  return false;
}

bool ShardedSession::has_pending_push() const {
  for (size_t i = 0; i < shards_.size(); ++i) {
    // A shard trying to rejoin is away, and owed at least the push it missed.
    if (rejoin_[i].valid() || shards_[i]->has_pending_push() || !backlog_[i].empty()) return true;
  }
  return false;
}

uint64_t ShardedSession::version() const {
  uint64_t sum = 0;
  for (const auto& s : shards_) sum += s->version();
  return sum;
}

}  // namespace convoy
