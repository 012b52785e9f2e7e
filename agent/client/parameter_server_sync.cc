#include "agent/client/parameter_server_sync.h"

#include <glog/logging.h>

#include <algorithm>
#include <climits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace convoy::agent {
namespace {

class RealClock final : public SyncClock {
 public:
  absl::Time Now() override { return absl::Now(); }
  void SleepFor(absl::Duration d) override { absl::SleepFor(d); }
};

uint32_t Clamp32(uint64_t n) { return static_cast<uint32_t>(std::min<uint64_t>(n, UINT32_MAX)); }

}  // namespace

const char* SyncStateName(SyncState state) {
  switch (state) {
    case SyncState::kInStep:
      return "in step";
    case SyncState::kOutOfStep:
      return "out of step";
    case SyncState::kAway:
      return "away";
    case SyncState::kRejoined:
      return "rejoined";
  }
  return "unknown";  // Unreachable: the switch names every state.
}

SyncClock* SyncClock::Real() {
  static RealClock* const clock = new RealClock;
  return clock;
}

ParameterServerSync::ParameterServerSync(std::vector<ServerTransport*> servers, SyncedModel* model,
                                         const SyncOptions& options, double epsilon,
                                         SyncClock* clock)
    : model_(model), options_(options), clock_(clock), epsilon_(epsilon) {
  shards_.reserve(servers.size());
  for (ServerTransport* server : servers) {
    shards_.emplace_back(server, options_.push, options_.rejoin);
  }
  // The first pull, on this thread: each server that answers is in step, the others away.
  model_->GetWeights(&online_);
  target_ = online_;  // The learner starts with its target a copy of its online network.
  bool any_online = false, any_target = false;
  for (size_t i = 0; i < shards_.size(); ++i) {
    Shard& s = shards_[i];
    absl::StatusOr<PullUpdate> pulled = s.transport->Pull(&s.online, &s.target, false);
    s.version = s.transport->version();
    if (!pulled.ok()) {  // The transport logged it; the agent rejoins later.
      s.link = Link::kAway;
      s.pacer.Lost(clock_->Now());
      continue;
    }
    if (pulled->online) {
      std::copy(s.online.begin(), s.online.end(), online_.begin() + s.transport->begin());
      any_online = true;
    }
    if (pulled->target) {
      std::copy(s.target.begin(), s.target.end(), target_.begin() + s.transport->begin());
      any_target = true;
    }
  }
  if (any_online) model_->SetWeights(online_);
  if (any_target) model_->SetTargetWeights(target_);
  for (Shard& s : shards_) {
    s.transport->StartTraining();
    s.worker = std::make_unique<ShardWorker>();  // From here on its worker calls the server.
  }
  state_ = AnyShard(Link::kInStep) ? SyncState::kInStep : SyncState::kAway;
  version_ = 0;
  for (const Shard& s : shards_) version_ += s.version;
  model_->GetWeights(&weights_at_sync_);
  PublishStats();
}

ParameterServerSync::~ParameterServerSync() {
  for (Shard& s : shards_) s.worker.reset();  // Each lets its call in flight end.
}

bool ParameterServerSync::AnyShard(Link link) const {
  return std::any_of(shards_.begin(), shards_.end(),
                     [link](const Shard& s) { return s.link == link; });
}

void ParameterServerSync::AddToBacklogs(absl::Span<const float> values, uint64_t minibatches,
                                        bool only_away) {
  for (Shard& s : shards_) {
    if (only_away && s.link != Link::kAway) continue;
    s.backlog.Add(RangeOf(s, values), minibatches);
  }
}

void ParameterServerSync::Trained() {
  ++minibatches_;
  // Whether the model's weights changed: only then are the weights an exchange in flight brings
  // older than the model's. A model that cannot step alone (the synthetic agent's) never moves on,
  // so its catch-up after a rejoin puts it back in step.
  bool moved = false;
  if (options_.push == PushMode::kDeltas) {
    model_->StepLocal(nullptr);  // Deltas: the local optimizer steps every minibatch.
    moved = true;
  } else if (state_ != SyncState::kInStep) {
    // No server in step: step locally, and keep the gradients for every server.
    if (model_->StepLocal(&step_gradient_)) {
      AddToBacklogs(step_gradient_, 1, /*only_away=*/false);
      moved = true;
    }
    minibatches_at_sync_ = minibatches_;  // Handed over to the backlogs.
  }
  if (in_flight_.active && moved) in_flight_.model_moved_on = true;
  if (in_flight_.active) return;  // The progress waits with the exchange in flight.
  if (state_ == SyncState::kInStep) {
    if (minibatches_ - minibatches_at_sync_ >= options_.batch_update_frequency) {
      StartExchange(ExchangeKind::kSync);
    }
  } else if (state_ == SyncState::kAway && minibatches_ % options_.batch_update_frequency == 0) {
    StartRejoins(RejoinPace::kPaced);  // Each server's pacer says when an attempt is due.
  }
}

bool ParameterServerSync::TrainingWaits() {
  if (!in_flight_.active || !in_flight_.answer_awaited) return false;
  // Answered, not yet taken in: WaitForAnswer takes it at once, before the model moves on.
  if (ExchangeDone()) return true;
  if (clock_->Now() - in_flight_.started < options_.sync_wait) return true;
  // The servers have not answered for sync_wait: learn locally until they do, as in an outage.
  LOG(WARNING) << options_.agent_id << ": no answer from the parameter server for "
               << options_.sync_wait << "; learning locally until there is one";
  in_flight_.answer_awaited = false;
  if (state_ == SyncState::kInStep) state_ = SyncState::kOutOfStep;
  PublishStats();
  return false;
}

bool ParameterServerSync::ExchangeDone() const {
  for (const Shard& s : shards_) {
    if (s.call == Shard::Call::kExchange && s.worker->busy()) return false;
  }
  return true;
}

void ParameterServerSync::WaitForAnswer() {
  if (!in_flight_.active) return;
  // A blocking wait is in real time, whatever the clock: the workers' threads answer in it.
  const absl::Time deadline = in_flight_.started_real + options_.sync_wait;
  for (Shard& s : shards_) {
    if (s.call == Shard::Call::kExchange && !s.worker->Wait(deadline)) return;
  }
  FinishExchange();
}

void ParameterServerSync::AwaitExchange() {
  if (in_flight_.active) {
    for (Shard& s : shards_) {
      if (s.call == Shard::Call::kExchange) s.worker->Wait();
    }
    FinishExchange();
  }
  TakeRejoins(/*wait=*/true);
}

void ParameterServerSync::Poll() {
  TakeRejoins(/*wait=*/false);
  if (in_flight_.active && ExchangeDone()) FinishExchange();
  if (!in_flight_.active) {
    // Out of step with servers that answer, or rejoined: push what was learned meanwhile, pull.
    if (state_ == SyncState::kOutOfStep || state_ == SyncState::kRejoined) {
      StartExchange(ExchangeKind::kCatchUp);
    }
  }
  // A server that is away is tried again when its pacer says, whether or not training reaches a
  // sync point meanwhile, and whatever the others do.
  if (AnyShard(Link::kAway) && clock_->Now() >= next_rejoin_poll_) {
    StartRejoins(RejoinPace::kPaced);
  }
}

uint64_t ParameterServerSync::TakeProgress() {
  // The progress to push, whole: what was trained since the last sync point.
  const uint64_t minibatches = minibatches_ - minibatches_at_sync_;
  bool have_values = false;
  switch (options_.push) {
    case PushMode::kDeltas:
      // The weight change since the last sync; its base is these weights once handed over.
      model_->GetWeights(&weights_at_exchange_);
      values_.resize(weights_at_exchange_.size());
      for (size_t i = 0; i < values_.size(); ++i) {
        values_[i] = weights_at_exchange_[i] - weights_at_sync_[i];
      }
      have_values = minibatches > 0;
      break;
    case PushMode::kGradients:
      // In step: the mean of the gradients accumulated on the weights of the last pull. Otherwise
      // what the local optimizer stepped with is in the backlogs already.
      have_values = state_ == SyncState::kInStep && minibatches > 0 &&
                    model_->TakeMeanGradient(&values_);  // False on an AMP overflow: skipped.
      break;
  }
  return have_values ? minibatches : 0;
}

void ParameterServerSync::HandShard(Shard& s, ExchangeKind kind, absl::Span<const float> values,
                                    bool have_values, uint64_t minibatches) {
  const absl::Span<const float> range =
      have_values ? RangeOf(s, values) : absl::Span<const float>();
  CHECK(s.call == Shard::Call::kNone) << "a server in step with a call in flight";
  s.call = Shard::Call::kExchange;
  s.pushed.reset();
  s.pulled.reset();
  s.whatever_held = kind == ExchangeKind::kCatchUp || s.link == Link::kBack;
  if (s.backlog.empty()) {
    s.values.assign(range.begin(), range.end());
    s.minibatches = have_values ? Clamp32(minibatches) : 0;
  } else {
    // Owed a backlog: this push and the backlog go as one, as the server would have summed them.
    if (have_values) s.backlog.Add(range, minibatches);
    s.minibatches = Clamp32(s.backlog.Take(&s.values));
  }
}

void ParameterServerSync::StartShardCall(Shard& s) {
  s.worker->Start([&s] {
    if (s.minibatches > 0) {
      // The pull once the push is answered (its request may go right behind the push).
      ServerTransport::Exchange exchange =
          s.transport->PushThenPull(s.values, s.minibatches, &s.online, &s.target, s.whatever_held);
      s.pushed = std::move(exchange.pushed);
      s.push_time = exchange.push_time;
      if (exchange.pulled.has_value()) {
        s.pulled = std::move(*exchange.pulled);
        s.pull_time = exchange.pull_time;
      }
    } else {  // Nothing to push counts as answered.
      const absl::Time start = absl::Now();
      s.pulled = s.transport->Pull(&s.online, &s.target, s.whatever_held);
      s.pull_time = absl::Now() - start;
    }
    s.has_pending_push = s.transport->has_pending_push();
    s.version = s.transport->version();
  });
}

absl::Span<const float> ParameterServerSync::RangeOf(const Shard& s,
                                                     absl::Span<const float> values) {
  return values.subspan(s.transport->begin(), s.transport->end() - s.transport->begin());
}

bool ParameterServerSync::StartExchange(ExchangeKind kind) {
  const uint64_t minibatches = TakeProgress();
  const bool have_values = minibatches > 0;
  const absl::Span<const float> values(values_);
  bool any_call = false, any_push = false;
  for (Shard& s : shards_) {
    if (s.link == Link::kAway) {
      // What it missed, kept until it is back.
      if (have_values) {
        s.backlog.Add(RangeOf(s, values), minibatches);
      }
      continue;
    }
    HandShard(s, kind, values, have_values, minibatches);
    any_call = true;
    any_push = any_push || s.minibatches > 0 || s.has_pending_push || s.link == Link::kBack;
  }
  minibatches_at_sync_ = minibatches_;
  if (!any_call || (kind == ExchangeKind::kSync && !any_push)) {
    for (Shard& s : shards_) {
      if (s.call == Shard::Call::kExchange) s.call = Shard::Call::kNone;
    }
    return false;
  }
  in_flight_ = InFlight{};
  in_flight_.active = true;
  in_flight_.kind = kind;
  in_flight_.started = clock_->Now();
  in_flight_.started_real = absl::Now();
  in_flight_.answer_awaited = true;
  in_flight_.minibatches = Clamp32(minibatches);
  for (Shard& s : shards_) {
    if (s.call == Shard::Call::kExchange) StartShardCall(s);
  }
  return true;
}

bool ParameterServerSync::TakePushAnswer(Shard& s, const std::string& server, bool catch_up,
                                         ExchangeResult* result) {
  const absl::StatusOr<PushAnswer>& pushed = *s.pushed;
  if (!pushed.ok()) {
    if (!s.has_pending_push) {
      LOG(ERROR) << options_.agent_id << ": push refused by " << server << ": " << pushed.status();
      return false;
    }
    // No answer: the transport keeps this push and resends it on rejoin, so the server applies it
    // once whether or not it already did.
    LOG(WARNING) << options_.agent_id << ": the push of " << s.minibatches << " minibatches to "
                 << server << " got no answer; it is resent on rejoin";
    s.unanswered += s.minibatches;
    return true;
  }
  if (!pushed->accepted) VLOG(1) << options_.agent_id << ": push not applied: " << pushed->message;
  if (s.link == Link::kBack || catch_up) {
    LOG(INFO) << options_.agent_id << ": pushed " << server << " the " << s.minibatches
              << " minibatches it missed: "
              << (pushed->accepted ? "applied" : absl::StrCat("refused, ", pushed->message));
  }
  std::optional<PushAnswer>& answer = result->answer;
  if (!answer.has_value()) {
    answer = *pushed;
  } else {
    answer->accepted = answer->accepted && pushed->accepted;
    answer->staleness = std::max(answer->staleness, pushed->staleness);
    answer->repeated = answer->repeated || pushed->repeated;
    if (!pushed->accepted && answer->message.empty()) answer->message = pushed->message;
  }
  if (&s == &shards_[0]) epsilon_ = pushed->epsilon;
  result->push_ms = std::max(result->push_ms, absl::ToDoubleMilliseconds(s.push_time));
  return false;
}

void ParameterServerSync::TakeShardExchange(size_t i, bool catch_up, ExchangeResult* result) {
  Shard& s = shards_[i];
  s.call = Shard::Call::kNone;
  const std::string server = shards_.size() > 1 ? absl::StrCat("shard ", i) : "the server";
  bool no_answer = s.pushed.has_value() && TakePushAnswer(s, server, catch_up, result);
  if (!s.has_pending_push) s.unanswered = 0;
  if (s.pulled.has_value() && s.pulled->ok()) {
    result->pull_ms = std::max(result->pull_ms, absl::ToDoubleMilliseconds(s.pull_time));
    const uint64_t begin = s.transport->begin();
    if ((*s.pulled)->online) {
      std::copy(s.online.begin(), s.online.end(), online_.begin() + begin);
      result->took_online[i] = true;
      result->any_online = true;
    }
    if ((*s.pulled)->target) {
      std::copy(s.target.begin(), s.target.end(), target_.begin() + begin);
      result->any_target = true;
    }
    s.link = Link::kInStep;
    return;
  }
  if (s.pulled.has_value() && absl::IsUnavailable(s.pulled->status())) no_answer = true;
  if (no_answer && s.link != Link::kAway) {
    LOG(WARNING) << options_.agent_id << ": " << server
                 << " is unreachable; what it is owed is kept until it is back";
    s.link = Link::kAway;
    s.pacer.Lost(clock_->Now());
  }
}

void ParameterServerSync::FinishExchange() {
  const bool catch_up = in_flight_.kind == ExchangeKind::kCatchUp;
  const bool model_moved_on = in_flight_.model_moved_on;
  in_flight_.active = false;
  in_flight_.answer_awaited = false;
  ExchangeResult result;
  result.took_online.assign(shards_.size(), false);
  for (size_t i = 0; i < shards_.size(); ++i) {
    if (shards_[i].call == Shard::Call::kExchange) TakeShardExchange(i, catch_up, &result);
  }
  if (result.answer.has_value()) {
    push_ms_sum_ += result.push_ms;
    ++push_count_;
    last_staleness_ = result.answer->staleness;
    absl::MutexLock lock(&stats_mu_);
    ++stats_.pushes;
    if (catch_up) ++stats_.outage_pushes;
    if (!result.answer->accepted) ++stats_.pushes_rejected;
  }
  if (result.pull_ms > 0 || result.any_online || result.any_target) {
    pull_ms_sum_ += result.pull_ms;
    ++pull_count_;
  }
  // Deltas: whatever was handed over is the servers' now (applied, kept in a backlog, or resent
  // under its number), so the next delta starts from the weights it was taken at.
  if (options_.push == PushMode::kDeltas && in_flight_.minibatches > 0) {
    weights_at_sync_ = weights_at_exchange_;
  }
  TakeWeights(result, model_moved_on);
  version_ = 0;
  for (const Shard& s : shards_) version_ += s.version;
  PublishStats();
}

void ParameterServerSync::TakeWeights(const ExchangeResult& result, bool model_moved_on) {
  const std::vector<bool>& took_online = result.took_online;
  const bool any_online = result.any_online;
  if (result.any_target) model_->SetTargetWeights(target_);
  if (any_online && !model_moved_on) {
    if (std::find(took_online.begin(), took_online.end(), false) != took_online.end()) {
      // The ranges this exchange did not bring stay as the model has them.
      model_->GetWeights(&weights_scratch_);
      for (size_t i = 0; i < shards_.size(); ++i) {
        if (took_online[i]) continue;
        const ServerTransport& t = *shards_[i].transport;
        std::copy(weights_scratch_.begin() + t.begin(), weights_scratch_.begin() + t.end(),
                  online_.begin() + t.begin());
      }
    }
    model_->SetWeights(online_);
  }
  if (!model_moved_on && (any_online || AnyShard(Link::kInStep))) {
    model_->GetWeights(&weights_at_sync_);
  }
  // In step when some server is and the model holds its weights; what the model learned locally
  // while waiting goes in a catch-up push.
  if (AnyShard(Link::kInStep) && !model_moved_on) {
    state_ = SyncState::kInStep;
  } else if (AnyShard(Link::kInStep) || AnyShard(Link::kBack)) {
    state_ = SyncState::kOutOfStep;
  } else {
    state_ = SyncState::kAway;
  }
}

void ParameterServerSync::StartRejoins(RejoinPace pace) {
  const absl::Time now = clock_->Now();
  next_rejoin_poll_ = now + kRejoinPollEvery;
  for (Shard& s : shards_) {
    if (s.link != Link::kAway || s.call != Shard::Call::kNone) continue;
    if (pace == RejoinPace::kPaced && !s.pacer.Due(now)) continue;
    s.call = Shard::Call::kRejoin;
    s.rejoined.reset();
    s.worker->Start([&s] {
      s.rejoined = s.transport->Resend();
      s.has_pending_push = s.transport->has_pending_push();
    });
  }
}

void ParameterServerSync::TakeRejoins(bool wait) {
  for (size_t i = 0; i < shards_.size(); ++i) {
    Shard& s = shards_[i];
    if (s.call != Shard::Call::kRejoin) continue;
    if (wait) s.worker->Wait();
    if (s.worker->busy()) continue;
    s.call = Shard::Call::kNone;
    const absl::Status outcome = s.rejoined->status();
    s.pacer.Attempted(clock_->Now(), outcome);
    if (!s.has_pending_push) s.unanswered = 0;
    if (!outcome.ok()) continue;
    s.link = Link::kBack;  // The next exchange pays its backlog and takes its weights.
    if (i == 0) epsilon_ = **s.rejoined;
  }
  // Away from every server until now: the catch-up comes next.
  if (state_ == SyncState::kAway && AnyShard(Link::kBack)) state_ = SyncState::kRejoined;
  PublishStats();
}

void ParameterServerSync::FinalSync() {
  const absl::Time start = clock_->Now();
  const absl::Time give_up = start + options_.final_sync_for;
  auto sleep_at_most = [&](absl::Duration d) {
    clock_->SleepFor(std::min(d, std::max(absl::ZeroDuration(), give_up - clock_->Now())));
  };
  // Evidence that the servers are gone, asked when something is still to reach them.
  ServerAbsence gone = ServerAbsence::kNoEvidence;
  absl::Time refused_since = absl::InfiniteFuture();
  auto server_gone = [&] {
    if (options_.presence == nullptr) return false;
    const ServerAbsence now = options_.presence->Check();
    if (now != ServerAbsence::kNothingListens) {
      refused_since = absl::InfiniteFuture();
    } else {
      refused_since = std::min(refused_since, clock_->Now());
      if (clock_->Now() - refused_since < kGoneAfterRefusedFor) return false;
    }
    gone = now;
    return gone != ServerAbsence::kNoEvidence;
  };
  // Asked first too: a launcher's death ends the run before any attempt (the servers went with
  // it, and the launcher's watchdog allows no time for one), and a refusal's time starts sooner.
  if (!OwesServer() || !server_gone()) AwaitExchange();
  while (gone == ServerAbsence::kNoEvidence && clock_->Now() < give_up) {
    if (!OwesServer()) break;  // Everything learned reached every server.
    bool exchanged = false;
    if (state_ == SyncState::kInStep) {
      exchanged = StartExchange(ExchangeKind::kSync);
    } else if (state_ == SyncState::kOutOfStep || state_ == SyncState::kRejoined) {
      exchanged = StartExchange(ExchangeKind::kCatchUp);  // Pushes what the outage learned.
    }
    StartRejoins(RejoinPace::kNow);  // The servers still away.
    AwaitExchange();
    if (!OwesServer()) break;
    if (server_gone()) break;
    if (!exchanged && AnyShard(Link::kInStep) && !AnyShard(Link::kBack)) {
      sleep_at_most(absl::Milliseconds(500));  // A server is still away: try it again soon.
    }
    if (state_ == SyncState::kAway) sleep_at_most(absl::Seconds(1));
  }
  if (OwesServer()) {
    uint64_t unanswered = 0, owed_away = 0;
    for (const Shard& s : shards_) {
      // Each server's share of the same minibatches: the most any server lacks.
      unanswered = std::max(unanswered, s.unanswered);
      owed_away = std::max(owed_away, s.backlog.minibatches());
    }
    bool in_flight = in_flight_.active;
    for (const Shard& s : shards_) in_flight = in_flight || s.worker->busy();
    const std::string lost = absl::StrCat(
        minibatches_ - minibatches_at_sync_ + unanswered + owed_away,
        " minibatches did not reach it",
        unanswered > 0 ? absl::StrCat(" (", unanswered, " in pushes that got no answer)") : "",
        owed_away > 0 ? absl::StrCat(" (", owed_away, " owed to a server that is away)") : "",
        in_flight ? ", nor maybe a push still in flight" : "");
    if (gone != ServerAbsence::kNoEvidence) {
      LOG(WARNING) << options_.agent_id << ": the final sync ended after " << clock_->Now() - start
                   << " of " << options_.final_sync_for << ": " << ServerAbsenceName(gone)
                   << " (gone, not out of reach); " << lost;
    } else {
      LOG(WARNING) << options_.agent_id << ": the parameter server stayed away for "
                   << options_.final_sync_for << "; " << lost;
    }
  }
}

bool ParameterServerSync::OwesServer() const {
  if (state_ != SyncState::kInStep || minibatches_ > minibatches_at_sync_ || in_flight_.active) {
    return true;
  }
  return std::any_of(shards_.begin(), shards_.end(), [](const Shard& s) {
    return s.link != Link::kInStep || !s.backlog.empty() || s.has_pending_push;
  });
}

std::string ParameterServerSync::Describe() const {
  std::string description = absl::StrCat("PS v", version_);
  if (shards_.size() > 1)
    absl::StrAppend(&description, " (summed over ", shards_.size(), " shards)");
  switch (state_) {
    case SyncState::kInStep:
      break;
    case SyncState::kOutOfStep:
      absl::StrAppend(&description, " (out of step)");
      break;
    case SyncState::kAway:
    case SyncState::kRejoined:
      absl::StrAppend(&description, " (disconnected)");
      break;
  }
  return description;
}

ExchangeTimes ParameterServerSync::TakeExchangeTimes() {
  ExchangeTimes times;
  if (push_count_ > 0) times.push_ms = push_ms_sum_ / push_count_;
  if (pull_count_ > 0) times.pull_ms = pull_ms_sum_ / pull_count_;
  push_ms_sum_ = pull_ms_sum_ = 0;
  push_count_ = pull_count_ = 0;
  return times;
}

SyncStats ParameterServerSync::stats() const {
  absl::MutexLock lock(&stats_mu_);
  return stats_;
}

void ParameterServerSync::PublishStats() {
  absl::MutexLock lock(&stats_mu_);
  stats_.in_step = state_ == SyncState::kInStep;
  stats_.version = version_;
}

}  // namespace convoy::agent
