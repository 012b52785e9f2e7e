#include "agent/parameter_server_sync.h"

#include <glog/logging.h>

#include <algorithm>
#include <climits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace convoy {
namespace {

class RealClock final : public SyncClock {
 public:
  absl::Time Now() override { return absl::Now(); }
  void SleepFor(absl::Duration d) override { absl::SleepFor(d); }
};

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

ParameterServerSync::ParameterServerSync(ParameterServerSession* session, SyncedModel* model,
                                         const SyncOptions& options, double epsilon,
                                         SyncClock* clock)
    : session_(session), model_(model), options_(options), clock_(clock), epsilon_(epsilon) {
  absl::StatusOr<PullUpdate> pulled = session_->Pull(&online_, &target_);
  if (pulled.ok()) {  // Otherwise the session logged it, and the agent rejoins later.
    if (pulled->online) model_->SetWeights(online_);
    if (pulled->target) model_->SetTargetWeights(target_);
  }
  session_->StartTraining();
  num_shards_ = session_->num_shards();
  state_ = session_->connected() ? SyncState::kInStep : SyncState::kAway;
  version_ = session_->version();
  model_->GetWeights(&weights_at_sync_);
  PublishStats();
  worker_ =
      std::make_unique<SessionWorker>(session_);  // From here on the worker calls the session.
}

ParameterServerSync::~ParameterServerSync() = default;

void ParameterServerSync::Trained() {
  ++minibatches_;
  if (worker_->busy()) in_flight_.model_moved_on = true;
  if (options_.push == PushMode::kDeltas) {
    model_->StepLocal(nullptr);  // Deltas: the local optimizer steps every minibatch.
  } else if (state_ != SyncState::kInStep) {
    // Not in step with the server: step locally, and keep the gradients for the server.
    if (model_->StepLocal(&step_gradient_)) outage_.Add(step_gradient_, 1);
  }
  if (worker_->busy()) return;  // The progress waits with the exchange in flight.
  if (state_ == SyncState::kInStep) {
    if (minibatches_ - minibatches_at_sync_ >= options_.batch_update_frequency) {
      StartExchange(Exchange::Kind::kSync);
    }
  } else if (state_ == SyncState::kAway && minibatches_ % options_.batch_update_frequency == 0) {
    StartExchange(Exchange::Kind::kRejoin);  // The session paces the attempts.
  }
}

bool ParameterServerSync::TrainingWaits() {
  if (!in_flight_.answer_awaited || !worker_->busy()) return false;
  if (clock_->Now() - in_flight_.started < options_.sync_wait) return true;
  // The server has not answered for sync_wait: learn locally until it does, as in an outage.
  LOG(WARNING) << options_.agent_id << ": no answer from the parameter server for "
               << options_.sync_wait << "; learning locally until there is one";
  in_flight_.answer_awaited = false;
  if (state_ == SyncState::kInStep) state_ = SyncState::kOutOfStep;
  PublishStats();
  return false;
}

void ParameterServerSync::WaitForAnswer() {
  // A blocking wait is in real time, whatever the clock: the worker's thread answers in it.
  if (std::unique_ptr<Exchange> e =
          worker_->WaitFinished(worker_->started() + options_.sync_wait)) {
    FinishExchange(std::move(e));
  }
}

void ParameterServerSync::AwaitExchange() {
  if (std::unique_ptr<Exchange> e = worker_->WaitFinished()) FinishExchange(std::move(e));
}

void ParameterServerSync::Poll() {
  if (std::unique_ptr<Exchange> done = worker_->TakeFinished()) FinishExchange(std::move(done));
  if (worker_->busy()) return;
  // Out of step and the server answers (or took a rejoin): push what was learned meanwhile, pull.
  if (state_ == SyncState::kOutOfStep || state_ == SyncState::kRejoined) {
    StartExchange(Exchange::Kind::kCatchUp);
  } else if (state_ == SyncState::kAway && clock_->Now() >= next_rejoin_poll_) {
    // Away: the session's pacing says when an attempt is due (soon after one that got no answer),
    // whether or not training reaches a sync point meanwhile.
    StartExchange(Exchange::Kind::kRejoin);
  }
}

bool ParameterServerSync::StartExchange(Exchange::Kind kind, RejoinPace pace) {
  auto e = std::make_unique<Exchange>();
  e->kind = kind;
  e->pace = pace;
  if (kind != Exchange::Kind::kRejoin) {
    uint64_t minibatches = minibatches_ - minibatches_at_sync_;
    e->values = std::move(values_);
    switch (options_.push) {
      case PushMode::kDeltas:
        // The weight change since the last sync; its base is these weights once the push is sent.
        model_->GetWeights(&weights_at_exchange_);
        e->values.resize(weights_at_exchange_.size());
        for (size_t i = 0; i < e->values.size(); ++i) {
          e->values[i] = weights_at_exchange_[i] - weights_at_sync_[i];
        }
        break;
      case PushMode::kGradients:
        if (state_ == SyncState::kInStep) {
          // The mean of the gradients accumulated on the weights of the last pull.
          if (minibatches > 0 && !model_->TakeMeanGradient(&e->values)) {
            minibatches = 0;  // AMP overflow: this update is skipped, as a gradient scaler does.
          }
        } else {
          // The mean of the gradients the local optimizer stepped with while out of step.
          minibatches = outage_.Take(&e->values);
        }
        break;
    }
    minibatches_at_sync_ = minibatches_;
    e->minibatches = static_cast<uint32_t>(std::min<uint64_t>(minibatches, UINT32_MAX));
    if (kind == Exchange::Kind::kSync && e->minibatches == 0 && !session_owes_) {
      values_ = std::move(e->values);
      return false;
    }
    e->online = std::move(online_);
    e->target = std::move(target_);
  }
  in_flight_.started = clock_->Now();
  if (kind == Exchange::Kind::kRejoin) next_rejoin_poll_ = in_flight_.started + kRejoinPollEvery;
  // A push and pull is waited for, for up to sync_wait; a rejoin attempt is not (the server is
  // away).
  in_flight_.answer_awaited = kind != Exchange::Kind::kRejoin;
  in_flight_.model_moved_on = false;
  worker_->Start(std::move(e));
  return true;
}

void ParameterServerSync::FinishExchange(std::unique_ptr<Exchange> e) {
  version_ = e->version;
  if (!e->has_pending_push) {
    unanswered_minibatches_ = 0;
  } else if (e->pushed.has_value() && !e->pushed->ok()) {
    unanswered_minibatches_ += e->minibatches;
  }
  in_flight_.answer_awaited = false;
  if (e->kind == Exchange::Kind::kRejoin) {
    if (e->rejoined->ok()) {
      epsilon_ = **e->rejoined;
      state_ = SyncState::kRejoined;
    } else {
      state_ = e->connected ? SyncState::kOutOfStep : SyncState::kAway;
    }
    PublishStats();
    return;
  }
  const bool catch_up = e->kind == Exchange::Kind::kCatchUp;
  if (e->pushed.has_value()) {
    const absl::StatusOr<PushAnswer>& pushed = *e->pushed;
    if (!pushed.ok()) {
      if (e->has_pending_push) {
        // No answer: the session keeps this push and resends it on rejoin, so the server applies it
        // once whether or not it already did. What is learned from here on is the outage's.
        LOG(WARNING) << options_.agent_id << ": the push of " << e->minibatches
                     << " minibatches got no answer; it is resent on rejoin";
      } else {
        LOG(ERROR) << options_.agent_id << ": push refused: " << pushed.status();
      }
    } else {
      if (!pushed->accepted)
        VLOG(1) << options_.agent_id << ": push not applied: " << pushed->message;
      if (catch_up) {
        LOG(INFO) << options_.agent_id << ": pushed " << e->minibatches
                  << " minibatches learned out of step with the server: "
                  << (pushed->accepted ? "applied" : absl::StrCat("refused, ", pushed->message));
      }
      push_ms_sum_ += absl::ToDoubleMilliseconds(e->push_time);
      ++push_count_;
      epsilon_ = pushed->epsilon;
      last_staleness_ = pushed->staleness;
      absl::MutexLock lock(&stats_mu_);
      ++stats_.pushes;
      if (catch_up) ++stats_.outage_pushes;
      if (!pushed->accepted) ++stats_.pushes_rejected;
    }
  }
  // Deltas: whatever was pushed is the server's now (applied, or resent under its number), so the
  // next delta starts from the weights it was taken at.
  if (e->pushed.has_value() && options_.push == PushMode::kDeltas) {
    weights_at_sync_ = weights_at_exchange_;
  }
  const bool pulled = e->pulled.has_value() && e->pulled->ok();
  if (pulled) {
    pull_ms_sum_ += absl::ToDoubleMilliseconds(e->pull_time);
    ++pull_count_;
    if ((*e->pulled)->target) model_->SetTargetWeights(e->target);
    if (!in_flight_.model_moved_on) {
      if ((*e->pulled)->online) model_->SetWeights(e->online);
      model_->GetWeights(&weights_at_sync_);
    }
  }
  // In step when the model holds the server's weights; what it learned locally while waiting goes
  // in a catch-up push.
  if (pulled && e->connected && !in_flight_.model_moved_on) {
    state_ = SyncState::kInStep;
  } else {
    state_ = e->connected ? SyncState::kOutOfStep : SyncState::kAway;
  }
  session_owes_ = e->has_pending_push;
  in_flight_.model_moved_on = false;
  values_ = std::move(e->values);
  online_ = std::move(e->online);
  target_ = std::move(e->target);
  PublishStats();
}

void ParameterServerSync::FinalSync() {
  const absl::Time start = clock_->Now();
  const absl::Time give_up = start + options_.final_sync_for;
  auto sleep_at_most = [&](absl::Duration d) {
    clock_->SleepFor(std::min(d, std::max(absl::ZeroDuration(), give_up - clock_->Now())));
  };
  // Evidence that the server is gone, asked when something is still to reach it.
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
  // Asked first too: a launcher's death ends the run before any attempt (the server went with it,
  // and the launcher's watchdog allows no time for one), and a refusal's time starts sooner.
  if (!OwesServer() || !server_gone()) AwaitExchange();
  while (gone == ServerAbsence::kNoEvidence && clock_->Now() < give_up) {
    if (state_ == SyncState::kInStep) {
      if ((minibatches_ == minibatches_at_sync_ && !session_owes_) ||
          !StartExchange(Exchange::Kind::kSync)) {
        break;  // Everything learned reached the server.
      }
    } else if (state_ == SyncState::kOutOfStep || state_ == SyncState::kRejoined) {
      StartExchange(Exchange::Kind::kCatchUp);  // Pushes what the outage learned.
    } else {
      StartExchange(Exchange::Kind::kRejoin, RejoinPace::kNow);
    }
    AwaitExchange();
    const bool reached = state_ == SyncState::kInStep && !session_owes_;
    if (!reached && server_gone()) break;
    if (state_ == SyncState::kInStep && session_owes_) {
      sleep_at_most(absl::Milliseconds(500));  // A shard is still away; its rejoin is paced.
    }
    if (state_ == SyncState::kAway) sleep_at_most(absl::Seconds(1));
  }
  if (OwesServer()) {
    const std::string lost = absl::StrCat(
        minibatches_ - minibatches_at_sync_ + unanswered_minibatches_,
        " minibatches did not reach it",
        unanswered_minibatches_ > 0
            ? absl::StrCat(" (", unanswered_minibatches_, " in pushes that got no answer)")
            : "",
        session_owes_ && unanswered_minibatches_ == 0 ? ", nor what a shard that is away is owed"
                                                      : "",
        worker_->busy() ? ", nor maybe a push still in flight" : "");
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
  return state_ != SyncState::kInStep || minibatches_ > minibatches_at_sync_ || session_owes_ ||
         worker_->busy();
}

std::string ParameterServerSync::Describe() const {
  std::string description = absl::StrCat("PS v", version_);
  if (num_shards_ > 1) absl::StrAppend(&description, " (summed over ", num_shards_, " shards)");
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

}  // namespace convoy
