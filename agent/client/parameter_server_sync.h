// ParameterServerSync: the agent's side of the sync protocol with its parameter server, one server
// or every shard of a sharded one, as the one owner of where the agent stands with each.
//
// The loop only acts, learns and tells this object what happened: a minibatch was accumulated
// (Trained), a step went by (Poll), the run ends (FinalSync). This object decides the rest: when a
// sync point pushes and pulls, when training waits for an answer and when it stops waiting (the
// agent is then out of step), the local steps while out of step or away, what each server is owed
// meanwhile (its backlog), the paced rejoin attempts, the catch-up pushes, and which answers the
// learner takes. The servers under it are transports (agent/client/ps_transport.h) with no state of
// their own.
//
// Per server it keeps {link, backlog, pacer} and a thread of that server's own (ShardWorker), for
// the length of the run. One rule for one server and for N:
//   - A server in step takes its range of every push and answers each exchange with its range of
//     the weights. A server that is away takes nothing: its range of every push goes into its
//     backlog, its range of the weights stays as the model has it, and it is tried again, paced,
//     on its own thread, never holding up the others' exchanges. A server that is back (rejoined)
//     is paid its backlog as one push in the next exchange, and its weights are taken again.
//   - The agent learns locally (its own optimizer steps) only while no server is in step: away
//     from all of them, or out of step (an answer overdue past sync_wait). Each local step's
//     gradient goes into every server's backlog; the weight changes of the delta push mode are
//     pushed (or kept) as they are.
//
// Thread-compatible: one thread (the agent's loop) calls everything except stats(), which any
// thread may call.
#ifndef CONVOY_AGENT_CLIENT_PARAMETER_SERVER_SYNC_H_
#define CONVOY_AGENT_CLIENT_PARAMETER_SERVER_SYNC_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "agent/client/outage_backlog.h"
#include "agent/client/ps_transport.h"
#include "agent/client/rejoin_pacer.h"
#include "agent/client/server_presence.h"
#include "agent/client/shard_worker.h"
#include "agent/client/sync_state.h"
#include "common/settings/run_defaults.h"

namespace convoy::agent {

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
  RejoinPacer::Options rejoin;                        // Per server.
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
  // After JoinServers: takes the servers' weights into `model` (each server that answers is in
  // step, the others away), starts training on `servers` (in shard order), and from then on only
  // this object's workers call them. `epsilon` is the Join's. `servers`, `model` and `clock` must
  // outlive this object.
  ParameterServerSync(std::vector<ServerTransport*> servers, SyncedModel* model,
                      const SyncOptions& options, double epsilon,
                      SyncClock* clock = SyncClock::Real());
  // Lets the calls in flight end (they have deadlines).
  ~ParameterServerSync();
  ParameterServerSync(const ParameterServerSync&) = delete;
  ParameterServerSync& operator=(const ParameterServerSync&) = delete;

  // The model accumulated one more minibatch: steps the local optimizer where the push mode
  // (deltas) or the state (no server in step) says so, keeping the gradients for the servers, and
  // at a sync point starts the exchange due (a push and pull in step, rejoin attempts while away).
  void Trained();

  // An exchange is in flight for less than sync_wait: training waits for its answer (acting goes
  // on). Past sync_wait the agent is out of step and learns locally; false from then on.
  bool TrainingWaits();
  // Waits, at most until the exchange in flight is sync_wait old, for its answer, and takes it in.
  void WaitForAnswer();
  // Waits for the exchange in flight and the rejoin attempts in flight, if any, however long they
  // take, and takes their answers in.
  void AwaitExchange();
  // Takes finished exchanges and rejoin attempts in; out of step with servers that answer, or
  // rejoined, starts the catch-up; starts the rejoin attempts of servers that are away and due (at
  // most every kRejoinPollEvery on the clock).
  void Poll();
  // The last sync of a run: for up to final_sync_for (on the clock), rejoins, catches up and pushes
  // until whatever was learned reached every server; logs what did not. Ends early, saying why in
  // the log, when options.presence gives evidence that the servers are gone rather than out of
  // reach: every address refused for kGoneAfterRefusedFor (a server that restarts at once is
  // waited for), or the agent's launcher died (then before any attempt, not waiting for the
  // exchange in flight either).
  void FinalSync();
  static constexpr absl::Duration kGoneAfterRefusedFor = absl::Seconds(1);

  SyncState state() const { return state_; }
  // The epsilon the server (shard 0 where it answered) last gave this agent.
  double epsilon() const { return epsilon_; }
  // The version of the weights last pulled: the server's, or for a sharded server the sum of its
  // shards' (it grows whenever any shard's does).
  uint64_t version() const { return version_; }
  // The staleness of the last push the servers answered (the largest over the shards).
  uint64_t last_staleness() const { return last_staleness_; }
  ExchangeTimes TakeExchangeTimes();
  // For the agent's report: "PS v<version>", the version named a sum when it is one (sharded), and
  // " (out of step)" or " (disconnected)" when not in step.
  std::string Describe() const;
  // Thread-safe.
  SyncStats stats() const;

 private:
  // Where the agent stands with one server.
  enum class Link {
    kInStep,  // It answers: it takes its range of each push and gives its range of the weights.
    kAway,    // It did not answer: its backlog grows, rejoin attempts are paced.
    kBack,    // A rejoin attempt took (the push that got no answer was sent again): the next
              // exchange pays its backlog and takes its weights.
  };
  // One server: what the agent knows of it, and what its worker's call in flight fills.
  struct Shard {
    Shard(ServerTransport* transport, PushMode push, const RejoinPacer::Options& pacing)
        : transport(transport), backlog(push), pacer(pacing) {}
    ServerTransport* transport;
    Link link = Link::kInStep;
    OutageBacklog backlog;  // What it is owed from pushes it missed and local steps.
    RejoinPacer pacer;
    std::unique_ptr<ShardWorker> worker;

    // The call in flight on the worker, or the last one, not yet taken in.
    enum class Call { kNone, kExchange, kRejoin };
    Call call = Call::kNone;
    // kExchange: push `values` over `minibatches` (none when 0), then, when answered, pull.
    std::vector<float> values;
    uint32_t minibatches = 0;
    bool whatever_held = false;  // The pull takes the server's weights whatever version is held.
    std::optional<absl::StatusOr<PushAnswer>> pushed;
    std::optional<absl::StatusOr<PullUpdate>> pulled;
    std::optional<absl::StatusOr<double>> rejoined;  // kRejoin.
    absl::Duration push_time, pull_time;
    std::vector<float> online, target;  // This server's range, as pulled.
    bool has_pending_push = false;      // After the call.
    uint64_t version = 0;               // After the call.
    // The minibatches of its pushes that got no answer, kept by its transport until a rejoin
    // resends them.
    uint64_t unanswered = 0;
  };

  // Which exchange the loop asks for.
  enum class ExchangeKind {
    kSync,     // In step: push what was trained since the last sync point, pull.
    kCatchUp,  // Out of step or rejoined: push what was learned locally, pull whatever is held.
  };
  // Hands the workers of the servers that answer an exchange: each its range of the progress to
  // push (with its backlog, when it is owed one) and a pull. False when there was nothing to start:
  // no server to exchange with, or a kSync with nothing to push and nothing owed.
  bool StartExchange(ExchangeKind kind);
  // The progress an exchange pushes, whole, into values_: its minibatches, 0 when there is none.
  uint64_t TakeProgress();
  // Hands `s` its range of `values` (all of them; none without `have_values`) and its backlog.
  void HandShard(Shard& s, ExchangeKind kind, absl::Span<const float> values, bool have_values,
                 uint64_t minibatches);
  // `s`'s range of the whole model's `values`.
  static absl::Span<const float> RangeOf(const Shard& s, absl::Span<const float> values);
  // Starts the call handed to `s` on its worker.
  static void StartShardCall(Shard& s);
  // The exchange in flight has ended on every worker that took part.
  bool ExchangeDone() const;
  void FinishExchange();
  // What an exchange's servers answered, as one.
  struct ExchangeResult {
    std::optional<PushAnswer> answer;  // The servers' answers as one.
    // The servers whose range of the weights it brought (online_ holds them).
    std::vector<bool> took_online;
    bool any_online = false;  // Some of took_online.
    bool any_target = false;
    double push_ms = 0, pull_ms = 0;
  };
  // Takes in server i's push answer and pull.
  void TakeShardExchange(size_t i, bool catch_up, ExchangeResult* result);
  // Takes in a shard's push answer into `result`; true when the push got no answer.
  bool TakePushAnswer(Shard& s, const std::string& server, bool catch_up, ExchangeResult* result);
  // The model takes what the exchange brought, and the sync state follows.
  void TakeWeights(const ExchangeResult& result, bool model_moved_on);
  // Starts a rejoin attempt on each server that is away, whose worker is free and (kPaced) whose
  // pacer says one is due.
  void StartRejoins(RejoinPace pace);
  // Takes in the rejoin attempts that ended (with `wait`, waits for those in flight first).
  void TakeRejoins(bool wait);
  // What was learned locally, or pushed while a server was away: its range into its backlog.
  void AddToBacklogs(absl::Span<const float> values, uint64_t minibatches, bool only_away);
  // Something learned has not reached every server yet: not in step, minibatches since the last
  // sync, a backlog, a push that got no answer, or an exchange still in flight.
  bool OwesServer() const;
  bool AnyShard(Link link) const;
  void PublishStats();

  std::vector<Shard> shards_;
  SyncedModel* const model_;
  const SyncOptions options_;
  SyncClock* const clock_;
  // Away, a Poll starts rejoin attempts at most this often; each server's pacer says when its
  // attempts are due.
  static constexpr absl::Duration kRejoinPollEvery = absl::Milliseconds(100);

  SyncState state_ = SyncState::kAway;
  double epsilon_;
  uint64_t version_ = 0;
  absl::Time next_rejoin_poll_ = absl::InfinitePast();  // On the clock.

  // The exchange in flight, as the loop sees it.
  struct InFlight {
    bool active = false;
    ExchangeKind kind = ExchangeKind::kSync;
    absl::Time started;           // On the clock.
    absl::Time started_real;      // On the wall clock, which the workers answer in.
    bool answer_awaited = false;  // Training waits for it (within sync_wait).
    bool model_moved_on = false;  // The model trained while it was in flight.
    uint32_t minibatches = 0;     // What it pushes that was trained since the last sync point.
  };
  InFlight in_flight_;

  uint64_t minibatches_ = 0;            // Trained so far.
  uint64_t minibatches_at_sync_ = 0;    // Of those, the ones pushed (or handed over to push).
  std::vector<float> values_;           // The progress an exchange pushes, whole.
  std::vector<float> online_, target_;  // The weights a pull assembles, whole.
  std::vector<float> weights_scratch_;  // The model's, for the ranges a pull did not bring.
  std::vector<float> weights_at_sync_;  // The weights the servers' versions correspond to.
  // Deltas: the model's weights when the exchange in flight was handed over.
  std::vector<float> weights_at_exchange_;
  // Gradients, not in step: what the local optimizer stepped with.
  std::vector<float> step_gradient_;

  double push_ms_sum_ = 0, pull_ms_sum_ = 0;
  int push_count_ = 0, pull_count_ = 0;
  uint64_t last_staleness_ = 0;

  mutable absl::Mutex stats_mu_;
  SyncStats stats_ ABSL_GUARDED_BY(stats_mu_);
};

}  // namespace convoy::agent

#endif  // CONVOY_AGENT_CLIENT_PARAMETER_SERVER_SYNC_H_
