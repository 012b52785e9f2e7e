// The agent's state in parts, as the server's is in ServerParts (param_server/core/server_part.h):
// each piece keeps its own state, saves it to its message of the replay checkpoint's AgentState
// (proto/convoy/v1/replay_checkpoint.proto), takes it back on --resume and reports its figures in
// the agent's stats. Resume, the stats and through them the progress record and the metrics read
// the parts; the agent loop copies no field by hand.
//
//   CountersPart     steps, minibatches and episodes, the next episode's seed, the returns' window;
//   ExplorationPart  epsilon, and alone, the schedule the server would run;
//   RandomPart       the acting random state;
//   LearnerPart      the learner's archive, the target network's age and the replay ratio's credit;
//   ReplayPart       the replay memory and its checkpointer (the memory saves itself beside the
//                    state: agent/learning/replay_checkpoint.h).
#ifndef CONVOY_AGENT_AGENT_PARTS_H_
#define CONVOY_AGENT_AGENT_PARTS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "agent/agent_stats.h"
#include "agent/learning/replay_checkpoint.h"
#include "agent/learning/replay_memory.h"
#include "common/settings/exploration.h"
#include "common/support/rates.h"
#include "convoy/v1/replay_checkpoint.pb.h"

namespace convoy::agent {

class AgentPart {
 public:
  virtual ~AgentPart() = default;

  // Writes its piece of `state`, on the acting thread.
  virtual void SaveTo(v1::AgentState& /*state*/) const {}
  // Takes its piece back from the state a replay checkpoint at `path` held, on the acting thread
  // before the run. DATA_LOSS (or the piece's own code) naming `path` when it does not fit.
  virtual absl::Status RestoreFrom(const v1::AgentState& /*state*/, absl::string_view /*path*/) {
    return absl::OkStatus();
  }
  // Its figures in the agent's stats; any thread.
  virtual void Report(AgentStats& /*stats*/) const {}
};

// The run's counters, over every process of the agent (a resumed one goes on counting), and the
// process's own (minibatch size, simulator outages, the first minibatch's delay). The acting thread
// counts; any thread reads.
class CountersPart final : public AgentPart {
 public:
  static constexpr int kReturnWindow = 20;  // Episodes in the average return.

  void StepTaken() ABSL_LOCKS_EXCLUDED(mu_);
  // A minibatch of `batch_size` trained on; `first_train_seconds` above 0 for this process's first.
  void Trained(uint64_t batch_size, double first_train_seconds) ABSL_LOCKS_EXCLUDED(mu_);
  struct EpisodeEnd {
    uint64_t episodes = 0;  // Counting this one.
    uint64_t env_steps = 0;
  };
  EpisodeEnd EpisodeEnded(double episode_return) ABSL_LOCKS_EXCLUDED(mu_);
  // The next episode's index among the episodes the agent started (its seed's offset).
  uint64_t TakeEpisodeSeed() ABSL_LOCKS_EXCLUDED(mu_);
  void SimulatorLost() ABSL_LOCKS_EXCLUDED(mu_);
  uint64_t env_steps() const ABSL_LOCKS_EXCLUDED(mu_);

  void SaveTo(v1::AgentState& state) const override ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status RestoreFrom(const v1::AgentState& state, absl::string_view path) override
      ABSL_LOCKS_EXCLUDED(mu_);
  void Report(AgentStats& stats) const override ABSL_LOCKS_EXCLUDED(mu_);

 private:
  mutable absl::Mutex mu_;
  // What a checkpoint keeps, kept as it keeps it: recent_returns is the window, oldest first.
  v1::AgentCounters saved_ ABSL_GUARDED_BY(mu_);
  uint64_t last_batch_size_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t simulator_outages_ ABSL_GUARDED_BY(mu_) = 0;
  double first_train_seconds_ ABSL_GUARDED_BY(mu_) = 0;
};

// Epsilon: with a server, the one it gives; alone, the schedule it would run, stepped at each local
// sync point.
class ExplorationPart final : public AgentPart {
 public:
  explicit ExplorationPart(uint32_t agent_index) : agent_index_(agent_index) {}

  void GoAlone(const ExplorationOptions& options) ABSL_LOCKS_EXCLUDED(mu_);
  // The server's (Join's, then each exchange's).
  void Set(double epsilon) ABSL_LOCKS_EXCLUDED(mu_);
  // Alone: an update applied, as the server counts them.
  void OnUpdateApplied() ABSL_LOCKS_EXCLUDED(mu_);
  double epsilon() const ABSL_LOCKS_EXCLUDED(mu_);

  void SaveTo(v1::AgentState& state) const override ABSL_LOCKS_EXCLUDED(mu_);
  // Alone, the schedule goes on from the saved one; with a server, Join gave the server's.
  absl::Status RestoreFrom(const v1::AgentState& state, absl::string_view path) override
      ABSL_LOCKS_EXCLUDED(mu_);
  void Report(AgentStats& stats) const override ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const uint32_t agent_index_;
  mutable absl::Mutex mu_;
  double epsilon_ ABSL_GUARDED_BY(mu_) = 1.0;
  std::optional<ExplorationSchedule> local_ ABSL_GUARDED_BY(mu_);
};

// The random state acting draws from (epsilon's coin and the random action); the acting thread's.
class RandomPart final : public AgentPart {
 public:
  explicit RandomPart(uint64_t seed) : engine_(seed) {}
  std::mt19937_64& engine() { return engine_; }

  void SaveTo(v1::AgentState& state) const override;
  absl::Status RestoreFrom(const v1::AgentState& state, absl::string_view path) override;

 private:
  std::mt19937_64 engine_;
};

// The learning loop's state: the learner's archive (LibTorch's, through the two functions Attach
// gives, so that this part needs no LibTorch), the minibatches trained, when the target network
// was last copied and the minibatches the replay ratio still owes. The acting thread's.
class LearnerPart final : public AgentPart {
 public:
  void Attach(std::function<std::string()> save_archive,
              std::function<absl::Status(const std::string&)> load_archive);

  uint64_t minibatches() const { return minibatches_; }
  void MinibatchTrained() { ++minibatches_; }
  // Alone: the target network is `frequency` minibatches old (TargetRefreshDue), and was copied.
  bool TargetRefreshDue(uint64_t frequency) const;
  void TargetRefreshed() { minibatches_at_target_ = minibatches_; }
  double credit() const { return credit_; }
  void Owe(double minibatches) { credit_ += minibatches; }
  void Repay() { credit_ -= 1.0; }

  void SaveTo(v1::AgentState& state) const override;
  absl::Status RestoreFrom(const v1::AgentState& state, absl::string_view path) override;

 private:
  std::function<std::string()> save_archive_;
  std::function<absl::Status(const std::string&)> load_archive_;
  uint64_t minibatches_ = 0;  // This process's.
  uint64_t minibatches_at_target_ = 0;
  double credit_ = 0;
};

// The replay memory, loaded from its checkpoint on --resume, and the checkpointer that saves it
// with the agent's state beside it. Reports the memory's size and the saves.
class ReplayPart final : public AgentPart {
 public:
  // An empty memory; with `checkpoint_dir`, one saved there every `every` (and when asked), and
  // with `resume`, the one saved there if any, whose agent's state goes to `saved`. Errors:
  // the directory's, and LoadReplayCheckpoint's.
  absl::Status Open(const ReplayOptions& options, const std::string& checkpoint_dir,
                    absl::string_view agent_id, bool resume, absl::Duration every, absl::Time start,
                    std::optional<v1::AgentState>* saved);
  ReplayMemory* memory() const { return memory_.get(); }
  ReplayCheckpointer* checkpointer() const { return checkpointer_.get(); }

  void Report(AgentStats& stats) const override;

 private:
  std::unique_ptr<ReplayMemory> memory_;
  // Null without a checkpoint dir. Declared after memory_, so that it (and a save in flight) ends
  // first.
  std::unique_ptr<ReplayCheckpointer> checkpointer_;
  uint64_t resumed_transitions_ = 0;
};

}  // namespace convoy::agent

#endif  // CONVOY_AGENT_AGENT_PARTS_H_
