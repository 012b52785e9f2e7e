// ParameterServerSync: the agent's side of the sync protocol with its parameter server, as one
// state machine (agent/sync_state.h) that the acting/learning loop drives.
//
// The loop only acts, learns and tells this object what happened: a minibatch was accumulated
// (Trained), a step went by (Poll), the run ends (FinalSync). This object decides the rest: when a
// sync point pushes and pulls, when training waits for an answer and when it stops waiting (the
// agent is then out of step), the local steps and the outage backlog while out of step or away, the
// paced rejoin attempts, the catch-up push, and which answers the learner takes. The session under
// it is one server's or a sharded server's (the shards' slicing and per-shard backlogs are the
// session's), so this logic is the same for both. Exchanges run on a SessionWorker, so the network
// never blocks acting.
//
// Thread-compatible: one thread (the agent's loop) calls everything except stats(), which any
// thread may call.
#ifndef CONVOY_AGENT_PARAMETER_SERVER_SYNC_H_
#define CONVOY_AGENT_PARAMETER_SERVER_SYNC_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "agent/outage_backlog.h"
#include "agent/ps_session.h"
#include "agent/server_presence.h"
#include "agent/session_worker.h"
#include "agent/sync_state.h"
#include "common/run_defaults.h"

namespace convoy {

// What the sync needs of the learner. DqnLearner's calls of the same names.
class SyncedModel {
 public:
  virtual ~SyncedModel() = default;
  virtual void GetWeights(std::vector<float>* flat) = 0;
  virtual void SetWeights(const std::vector<float>& flat) = 0;
  virtual void SetTargetWeights(const std::vector<float>& flat) = 0;
  // The mean of the gradients accumulated since the last take; false when it overflowed (AMP), and
  // the update is skipped.
  virtual bool TakeMeanGradient(std::vector<float>* mean_gradient) = 0;
  // Steps the local optimizer on the accumulated gradients; with `mean_gradient`, also copies the
  // gradient applied there. False when it overflowed (nothing applied).
  virtual bool StepLocal(std::vector<float>* mean_gradient) = 0;
};

// The time the sync reads and waits in: the wall clock in a run, a driven one in tests.
class SyncClock {
 public:
  virtual ~SyncClock() = default;
  virtual absl::Time Now() = 0;
  virtual void SleepFor(absl::Duration d) = 0;
  // absl::Now and absl::SleepFor.
  static SyncClock* Real();
};

struct SyncOptions {
  std::string agent_id;  // For the log.
  PushMode push = PushMode::kGradients;
  // Minibatches between sync points; rejoin attempts are made at multiples of it.
  uint64_t batch_update_frequency = run_defaults::kBatchUpdateFrequency;
  absl::Duration sync_wait = absl::Seconds(1);        // --sync_wait.
  absl::Duration final_sync_for = absl::Seconds(10);  // --final_sync_for.
  // Asked by FinalSync at its start and after each attempt that did not reach the server: evidence
  // that it is gone ends the final sync early (a refusal once it has lasted kGoneAfterRefusedFor, a
  // launcher's death at once). Null: the server is never taken for gone.
  std::shared_ptr<ServerPresence> presence;
};

// Counters for AgentStats.
struct SyncStats {
  bool in_step = false;
  uint64_t version = 0;
  uint64_t pushes = 0;
  uint64_t outage_pushes = 0;
  uint64_t pushes_rejected = 0;
};

// Mean push and pull times since the last TakeExchangeTimes (0 when there was none).
struct ExchangeTimes {
  double push_ms = 0;
  double pull_ms = 0;
};

class ParameterServerSync {
 public:
  // After Join: takes the server's weights into `model` when the server answers (in step; away
  // otherwise), starts training on `session`, and from then on only this object's worker calls
  // `session`. `epsilon` is Join's. `session`, `model` and `clock` must outlive this object.
  ParameterServerSync(ParameterServerSession* session, SyncedModel* model,
                      const SyncOptions& options, double epsilon,
                      SyncClock* clock = SyncClock::Real());
  // Lets the exchange in flight end (its calls have deadlines).
  ~ParameterServerSync();
  ParameterServerSync(const ParameterServerSync&) = delete;
  ParameterServerSync& operator=(const ParameterServerSync&) = delete;

  // The model accumulated one more minibatch: steps the local optimizer where the push mode
  // (deltas) or the state (not in step) says so, keeping the gradients for the catch-up, and at a
  // sync point starts the exchange due (a push and pull in step, a rejoin attempt while away).
  void Trained();

  // A push and pull is in flight for less than sync_wait: training waits for its answer (acting
  // goes on). Past sync_wait the agent is out of step and learns locally; false from then on.
  bool TrainingWaits();
  // Waits, at most until the exchange in flight is sync_wait old, for its answer, and takes it in.
  void WaitForAnswer();
  // Waits for the exchange in flight, if any, however long it takes, and takes its answer in.
  void AwaitExchange();
  // Takes a finished exchange in; out of step with a server that answers, or rejoined, starts the
  // catch-up; away, starts a rejoin exchange (at most every kRejoinPollEvery on the clock).
  void Poll();
  // The last sync of a run: for up to final_sync_for (on the clock), rejoins, catches up and pushes
  // until whatever was learned reached the server; logs what did not. Ends early, saying why in
  // the log, when options.presence gives evidence that the server is gone rather than out of
  // reach: every address refused for kGoneAfterRefusedFor (a server that restarts at once is
  // waited for), or the agent's launcher died (then before any attempt, not waiting for the
  // exchange in flight either).
  void FinalSync();
  static constexpr absl::Duration kGoneAfterRefusedFor = absl::Seconds(1);

  SyncState state() const { return state_; }
  // The epsilon the server last gave this agent.
  double epsilon() const { return epsilon_; }
  // The session's version() when the last exchange ended: the server's version of the weights last
  // pulled, or for a sharded server the sum of its shards' (it grows whenever any shard's does).
  uint64_t version() const { return version_; }
  // The staleness of the last push the server answered.
  uint64_t last_staleness() const { return last_staleness_; }
  ExchangeTimes TakeExchangeTimes();
  // For the agent's report: "PS v<version>", the version named a sum when it is one (sharded), and
  // " (out of step)" or " (disconnected)" when not in step.
  std::string Describe() const;
  // Thread-safe.
  SyncStats stats() const;

 private:
  // Hands the worker an exchange of `kind`, with the progress to push for kSync and kCatchUp. False
  // when a kSync had nothing to push.
  bool StartExchange(Exchange::Kind kind, RejoinPace pace = RejoinPace::kPaced);
  void FinishExchange(std::unique_ptr<Exchange> exchange);
  void PublishStats();
  // Something learned has not reached the server yet: out of step, minibatches since the last sync,
  // a shard owed, or an exchange still in flight.
  bool OwesServer() const;

  ParameterServerSession* const session_;
  SyncedModel* const model_;
  const SyncOptions options_;
  SyncClock* const clock_;
  // Away, a Poll hands the worker a rejoin exchange at most this often; the session paces the
  // attempts themselves (RejoinPacer), and answers one not due at once.
  static constexpr absl::Duration kRejoinPollEvery = absl::Milliseconds(100);

  size_t num_shards_ = 1;  // The session's.
  SyncState state_ = SyncState::kAway;
  double epsilon_;
  uint64_t version_ = 0;
  // The session still owes a server something: a push that got no answer, or a shard's backlog.
  bool session_owes_ = false;
  // The minibatches of pushes that got no answer, kept by the session until a rejoin resends them.
  uint64_t unanswered_minibatches_ = 0;
  absl::Time next_rejoin_poll_ = absl::InfinitePast();  // On the clock.

  // The exchange in flight, as the loop sees it (the worker holds the exchange itself).
  struct InFlight {
    absl::Time started;           // On the clock.
    bool answer_awaited = false;  // Training waits for it (a push and pull within sync_wait).
    bool model_moved_on = false;  // The model trained while it was in flight.
  };
  InFlight in_flight_;

  uint64_t minibatches_ = 0;          // Trained so far.
  uint64_t minibatches_at_sync_ = 0;  // Of those, the ones pushed (or handed over to push).
  // Buffers lent to the exchanges, so that nothing is allocated per exchange.
  std::vector<float> values_, online_, target_;
  std::vector<float> weights_at_sync_;  // The weights the server's version corresponds to.
  // Deltas: the model's weights when the exchange in flight was handed over.
  std::vector<float> weights_at_exchange_;
  // Gradients mode out of step: what the local optimizer stepped with, for the catch-up.
  std::vector<float> step_gradient_;
  OutageBacklog outage_{PushMode::kGradients};

  double push_ms_sum_ = 0, pull_ms_sum_ = 0;
  int push_count_ = 0, pull_count_ = 0;
  uint64_t last_staleness_ = 0;

  mutable absl::Mutex stats_mu_;
  SyncStats stats_ ABSL_GUARDED_BY(stats_mu_);

  std::unique_ptr<SessionWorker> worker_;  // Last: stops first.
};

}  // namespace convoy

#endif  // CONVOY_AGENT_PARAMETER_SERVER_SYNC_H_
