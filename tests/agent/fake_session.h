// FakeSession: a ParameterServerSession with no server behind it, whose answers a test sets, for
// driving the agent's sync logic without a network; FakeShard, one shard of a sharded server for
// driving ShardedSession. FakeModel and FakeClock are the model and clock
// the sync reads, with no learner and no wall clock.
#ifndef CONVOY_TESTS_AGENT_FAKE_SESSION_H_
#define CONVOY_TESTS_AGENT_FAKE_SESSION_H_

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "agent/parameter_server_sync.h"
#include "agent/ps_session.h"

namespace convoy {
namespace testing {

// Thread-safe: the sync's worker calls it while the test sets it.
class FakeSession : public ParameterServerSession {
 public:
  // One push as the server took it.
  struct Applied {
    std::vector<float> values;
    uint32_t minibatches = 0;
    bool resent = false;  // Resent by a rejoin after it got no answer.
  };

  explicit FakeSession(std::vector<float> server_weights) : weights_(std::move(server_weights)) {}

  // Away: pushes get no answer (kept and resent on rejoin), pulls and rejoins fail.
  void SetServerAway(bool away) {
    absl::MutexLock lock(&mu_);
    away_ = away;
  }
  // Held: the next push waits, unanswered, until released.
  void HoldPushes(bool hold) {
    absl::MutexLock lock(&mu_);
    hold_ = hold;
  }
  // A shard is away and owed a backlog: the session stays connected but owes something.
  void SetOwes(bool owes) {
    absl::MutexLock lock(&mu_);
    owes_ = owes;
  }
  // Stands for a sharded server of `shards` shards.
  void SetShards(size_t shards) {
    absl::MutexLock lock(&mu_);
    shards_ = shards;
  }
  // The server's weights move on (another agent pushed).
  void AdvanceServer(float weight) {
    absl::MutexLock lock(&mu_);
    for (float& w : weights_) w = weight;
    ++server_version_;
  }
  std::vector<Applied> applied() const {
    absl::MutexLock lock(&mu_);
    return applied_;
  }
  int rejoins() const {
    absl::MutexLock lock(&mu_);
    return rejoins_;
  }

  absl::StatusOr<JoinResult> Join(int, const JoinOptions&) override {
    JoinResult joined;
    joined.epsilon = kEpsilon;
    return joined;
  }
  void StartTraining() override {}
  absl::StatusOr<PushAnswer> Push(absl::Span<const float> values, uint32_t minibatches) override {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](bool* hold) { return !*hold; }, &hold_));
    if (away_) {
      pending_ = Applied{{values.begin(), values.end()}, minibatches, true};
      state_ = State::kDisconnected;
      return absl::UnavailableError("the fake server is away");
    }
    applied_.push_back({{values.begin(), values.end()}, minibatches, false});
    ++server_version_;
    PushAnswer result;
    result.accepted = true;
    result.epsilon = kEpsilon / 2;
    result.version = server_version_;
    return result;
  }
  absl::StatusOr<PullUpdate> Pull(std::vector<float>* online, std::vector<float>*) override {
    absl::MutexLock lock(&mu_);
    if (away_) {
      state_ = State::kDisconnected;
      return absl::UnavailableError("the fake server is away");
    }
    PullUpdate update;
    if (version_ != server_version_) {
      *online = weights_;
      version_ = server_version_;
      update.online = true;
    }
    return update;
  }
  void Disconnected(const absl::Status&) override {
    absl::MutexLock lock(&mu_);
    state_ = State::kDisconnected;
  }
  absl::StatusOr<double> Rejoin(RejoinPace) override {
    absl::MutexLock lock(&mu_);
    ++rejoins_;
    if (away_) return absl::UnavailableError("the fake server is away");
    if (pending_.has_value()) {
      applied_.push_back(*pending_);
      ++server_version_;
      pending_.reset();
    }
    state_ = State::kRejoining;
    return kEpsilon;
  }
  void Reconnected() override {
    absl::MutexLock lock(&mu_);
    state_ = State::kConnected;
    version_ = 0;  // The next pull takes the server's weights whatever is held.
  }
  bool connected() const override {
    absl::MutexLock lock(&mu_);
    return state_ == State::kConnected;
  }
  bool has_pending_push() const override {
    absl::MutexLock lock(&mu_);
    return pending_.has_value() || owes_;
  }
  uint64_t version() const override {
    absl::MutexLock lock(&mu_);
    return version_;
  }
  uint64_t incarnation() const override { return 1; }
  size_t num_shards() const override {
    absl::MutexLock lock(&mu_);
    return shards_;
  }

  static constexpr double kEpsilon = 0.5;

 private:
  enum class State { kConnected, kDisconnected, kRejoining };

  mutable absl::Mutex mu_;
  State state_ ABSL_GUARDED_BY(mu_) = State::kConnected;
  bool away_ ABSL_GUARDED_BY(mu_) = false;
  bool hold_ ABSL_GUARDED_BY(mu_) = false;
  bool owes_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<float> weights_ ABSL_GUARDED_BY(mu_);
  uint64_t server_version_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t version_ ABSL_GUARDED_BY(mu_) = 0;
  std::optional<Applied> pending_ ABSL_GUARDED_BY(mu_);
  std::vector<Applied> applied_ ABSL_GUARDED_BY(mu_);
  int rejoins_ ABSL_GUARDED_BY(mu_) = 0;
  size_t shards_ ABSL_GUARDED_BY(mu_) = 1;
};

// One shard of a sharded server, for driving ShardedSession: it serves [begin, end) of the flat
// vector, all its weights `weight`. Its server can be away, and its rejoin attempts held, as a
// silent link holds an attempt until its connect timeout. Thread-safe: ShardedSession calls it from
// several threads.
class FakeShard : public ServerSession {
 public:
  struct Applied {
    std::vector<float> values;
    uint32_t minibatches = 0;
  };

  FakeShard(uint64_t begin, uint64_t end, float weight)
      : begin_(begin), end_(end), weights_(end - begin, weight) {}

  // Away: pushes get no answer (kept and resent on rejoin), pulls and rejoins fail.
  void SetServerAway(bool away) {
    absl::MutexLock lock(&mu_);
    away_ = away;
  }
  // Held: a rejoin attempt waits, unanswered, until released.
  void HoldRejoins(bool hold) {
    absl::MutexLock lock(&mu_);
    hold_ = hold;
  }
  // What rejoin_due() says while disconnected (the pacing is PsSession's, tested on its own).
  void SetRejoinDue(bool due) {
    absl::MutexLock lock(&mu_);
    due_ = due;
  }
  // Waits until `n` rejoin attempts have begun.
  void AwaitRejoinsBegun(int n) const {
    struct Begun {
      const int* rejoins;
      int n;
    };
    absl::MutexLock lock(&mu_);
    Begun begun{&rejoins_, n};
    mu_.Await(absl::Condition(
        +[](Begun* b) { return *b->rejoins >= b->n; }, &begun));
  }
  int rejoins() const {
    absl::MutexLock lock(&mu_);
    return rejoins_;
  }
  int pulls() const {
    absl::MutexLock lock(&mu_);
    return pulls_;
  }
  std::vector<Applied> applied() const {
    absl::MutexLock lock(&mu_);
    return applied_;
  }

  absl::StatusOr<JoinResult> Join(int, const JoinOptions&) override {
    absl::MutexLock lock(&mu_);
    state_ = State::kConnected;
    JoinResult joined;
    joined.epsilon = FakeSession::kEpsilon;
    return joined;
  }
  void StartTraining() override {}
  absl::StatusOr<PushAnswer> Push(absl::Span<const float> values, uint32_t minibatches) override {
    absl::MutexLock lock(&mu_);
    if (away_) {
      pending_ = Applied{{values.begin(), values.end()}, minibatches};
      state_ = State::kDisconnected;
      return absl::UnavailableError("the fake shard is away");
    }
    applied_.push_back({{values.begin(), values.end()}, minibatches});
    ++server_version_;
    PushAnswer result;
    result.accepted = true;
    result.epsilon = FakeSession::kEpsilon;
    result.version = server_version_;
    return result;
  }
  absl::StatusOr<PullUpdate> Pull(std::vector<float>* online, std::vector<float>*) override {
    absl::MutexLock lock(&mu_);
    if (away_) {
      state_ = State::kDisconnected;
      return absl::UnavailableError("the fake shard is away");
    }
    ++pulls_;
    PullUpdate update;
    if (version_ != server_version_) {
      *online = weights_;
      version_ = server_version_;
      update.online = true;
    }
    return update;
  }
  void Disconnected(const absl::Status&) override {
    absl::MutexLock lock(&mu_);
    state_ = State::kDisconnected;
  }
  absl::StatusOr<double> Rejoin(RejoinPace) override {
    absl::MutexLock lock(&mu_);
    ++rejoins_;
    mu_.Await(absl::Condition(
        +[](bool* hold) { return !*hold; }, &hold_));
    if (away_) return absl::UnavailableError("the fake shard is away");
    if (pending_.has_value()) {
      applied_.push_back(*pending_);
      ++server_version_;
      pending_.reset();
    }
    state_ = State::kRejoining;
    return FakeSession::kEpsilon;
  }
  void Reconnected() override {
    absl::MutexLock lock(&mu_);
    state_ = State::kConnected;
    version_ = 0;
  }
  bool connected() const override {
    absl::MutexLock lock(&mu_);
    return state_ == State::kConnected;
  }
  bool rejoining() const override {
    absl::MutexLock lock(&mu_);
    return state_ == State::kRejoining;
  }
  bool rejoin_due() const override {
    absl::MutexLock lock(&mu_);
    return state_ == State::kDisconnected && due_;
  }
  bool has_pending_push() const override {
    absl::MutexLock lock(&mu_);
    return pending_.has_value();
  }
  uint64_t version() const override {
    absl::MutexLock lock(&mu_);
    return version_;
  }
  uint64_t incarnation() const override { return 1; }
  uint64_t begin() const override { return begin_; }
  uint64_t end() const override { return end_; }

 private:
  enum class State { kConnected, kDisconnected, kRejoining };

  const uint64_t begin_, end_;
  mutable absl::Mutex mu_;
  State state_ ABSL_GUARDED_BY(mu_) = State::kDisconnected;
  bool away_ ABSL_GUARDED_BY(mu_) = false;
  bool hold_ ABSL_GUARDED_BY(mu_) = false;
  bool due_ ABSL_GUARDED_BY(mu_) = true;
  std::vector<float> weights_ ABSL_GUARDED_BY(mu_);
  uint64_t server_version_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t version_ ABSL_GUARDED_BY(mu_) = 0;
  std::optional<Applied> pending_ ABSL_GUARDED_BY(mu_);
  std::vector<Applied> applied_ ABSL_GUARDED_BY(mu_);
  int rejoins_ ABSL_GUARDED_BY(mu_) = 0;
  int pulls_ ABSL_GUARDED_BY(mu_) = 0;
};

// A model whose every minibatch has the same gradient and whose local step adds it to the weights.
class FakeModel : public SyncedModel {
 public:
  FakeModel(std::vector<float> weights, std::vector<float> gradient)
      : weights_(std::move(weights)), gradient_(std::move(gradient)) {}

  void GetWeights(std::vector<float>* flat) override { *flat = weights_; }
  void SetWeights(const std::vector<float>& flat) override { weights_ = flat; }
  void SetTargetWeights(const std::vector<float>&) override {}
  bool TakeMeanGradient(std::vector<float>* mean_gradient) override {
    *mean_gradient = gradient_;
    return true;
  }
  bool StepLocal(std::vector<float>* mean_gradient) override {
    ++local_steps_;
    for (size_t i = 0; i < weights_.size(); ++i) weights_[i] += gradient_[i];
    if (mean_gradient != nullptr) *mean_gradient = gradient_;
    return true;
  }

  const std::vector<float>& weights() const { return weights_; }
  int local_steps() const { return local_steps_; }

 private:
  std::vector<float> weights_, gradient_;
  int local_steps_ = 0;
};

// Time that moves only when a test (or a sleep) moves it.
class FakeClock : public SyncClock {
 public:
  absl::Time Now() override {
    absl::MutexLock lock(&mu_);
    return now_;
  }
  void SleepFor(absl::Duration d) override { Advance(d); }
  void Advance(absl::Duration d) {
    absl::MutexLock lock(&mu_);
    now_ += d;
  }

 private:
  absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_) = absl::UnixEpoch();
};

}  // namespace testing
}  // namespace convoy

#endif  // CONVOY_TESTS_AGENT_FAKE_SESSION_H_
