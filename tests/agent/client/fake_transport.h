// FakeServer: a ServerTransport with no server behind it, serving [begin, end) of the flat vector,
// whose answers a test sets, for driving the agent's sync without a network; FakeServers, the one
// server or the shards of a sharded one as the sync takes them. FakeModel and FakeClock are the
// model and clock the sync reads, with no learner and no wall clock.
#ifndef CONVOY_TESTS_AGENT_CLIENT_FAKE_TRANSPORT_H_
#define CONVOY_TESTS_AGENT_CLIENT_FAKE_TRANSPORT_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "agent/client/parameter_server_sync.h"
#include "agent/client/ps_transport.h"

namespace convoy::testing {

inline constexpr double kFakeEpsilon = 0.5;

// Thread-safe: the sync's worker calls it while the test sets it.
class FakeServer : public agent::ServerTransport {
 public:
  // One push as the server took it.
  struct Applied {
    std::vector<float> values;
    uint32_t minibatches = 0;
    bool resent = false;  // Sent again by a rejoin after it got no answer.
  };

  FakeServer(uint64_t begin, uint64_t end, float weight)
      : begin_(begin), end_(end), weights_(end - begin, weight) {}

  // Away: pushes get no answer (kept and resent on rejoin), pulls and rejoins fail.
  void SetServerAway(bool away) {
    absl::MutexLock lock(&mu_);
    away_ = away;
  }
  // Held: the next push waits, unanswered, until released.
  void HoldPushes(bool hold) {
    absl::MutexLock lock(&mu_);
    hold_pushes_ = hold;
  }
  // Held: a rejoin attempt waits, unanswered, until released (as a silent link holds one until
  // its connect timeout).
  void HoldRejoins(bool hold) {
    absl::MutexLock lock(&mu_);
    hold_rejoins_ = hold;
  }
  // The server's weights move on (another agent pushed).
  void AdvanceServer(float weight) {
    absl::MutexLock lock(&mu_);
    for (float& w : weights_) w = weight;
    ++server_version_;
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
  std::vector<Applied> applied() const {
    absl::MutexLock lock(&mu_);
    return applied_;
  }
  int rejoins() const {
    absl::MutexLock lock(&mu_);
    return rejoins_;
  }
  int pulls() const {
    absl::MutexLock lock(&mu_);
    return pulls_;
  }

  absl::StatusOr<agent::JoinResult> Join(int, const agent::JoinOptions&) override {
    agent::JoinResult joined;
    joined.epsilon = kFakeEpsilon;
    return joined;
  }
  void StartTraining() override {}
  absl::StatusOr<PushAnswer> Push(absl::Span<const float> values, uint32_t minibatches) override {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](bool* hold) { return !*hold; }, &hold_pushes_));
    if (away_) {
      pending_ = Applied{{values.begin(), values.end()}, minibatches, true};
      return absl::UnavailableError("the fake server is away");
    }
    applied_.push_back({{values.begin(), values.end()}, minibatches, false});
    ++server_version_;
    PushAnswer result;
    result.accepted = true;
    result.epsilon = kFakeEpsilon / 2;
    result.version = server_version_;
    return result;
  }
  absl::StatusOr<agent::PullUpdate> Pull(std::vector<float>* online, std::vector<float>*,
                                         bool whatever_held) override {
    absl::MutexLock lock(&mu_);
    if (away_) return absl::UnavailableError("the fake server is away");
    ++pulls_;
    agent::PullUpdate update;
    if (whatever_held || version_ != server_version_) {
      *online = weights_;
      version_ = server_version_;
      update.online = true;
    }
    return update;
  }
  absl::StatusOr<double> Resend() override {
    absl::MutexLock lock(&mu_);
    ++rejoins_;
    mu_.Await(absl::Condition(
        +[](bool* hold) { return !*hold; }, &hold_rejoins_));
    if (away_) return absl::UnavailableError("the fake server is away");
    if (pending_.has_value()) {
      applied_.push_back(*pending_);
      ++server_version_;
      pending_.reset();
    }
    return kFakeEpsilon;
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
  const uint64_t begin_, end_;
  mutable absl::Mutex mu_;
  bool away_ ABSL_GUARDED_BY(mu_) = false;
  bool hold_pushes_ ABSL_GUARDED_BY(mu_) = false;
  bool hold_rejoins_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<float> weights_ ABSL_GUARDED_BY(mu_);
  uint64_t server_version_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t version_ ABSL_GUARDED_BY(mu_) = 0;
  std::optional<Applied> pending_ ABSL_GUARDED_BY(mu_);
  std::vector<Applied> applied_ ABSL_GUARDED_BY(mu_);
  int rejoins_ ABSL_GUARDED_BY(mu_) = 0;
  int pulls_ ABSL_GUARDED_BY(mu_) = 0;
};

// A model of `weights.size()` values served by `shards` servers, each an equal range (the last
// takes what is left), every server's weights `server_weight`.
class FakeServers {
 public:
  FakeServers(size_t parameters, size_t shards, float server_weight) {
    const size_t each = parameters / shards;
    for (size_t i = 0; i < shards; ++i) {
      const size_t begin = i * each, end = i + 1 == shards ? parameters : begin + each;
      servers_.push_back(std::make_unique<FakeServer>(begin, end, server_weight));
    }
  }
  std::vector<agent::ServerTransport*> transports() const {
    std::vector<agent::ServerTransport*> t;
    for (const auto& s : servers_) t.push_back(s.get());
    return t;
  }
  size_t size() const { return servers_.size(); }
  FakeServer& operator[](size_t i) { return *servers_[i]; }
  // Every server away (or back), as one server's outage is for the agent.
  void SetServersAway(bool away) {
    for (auto& s : servers_) s->SetServerAway(away);
  }
  void HoldPushes(bool hold) {
    for (auto& s : servers_) s->HoldPushes(hold);
  }
  int rejoins() const {  // Attempts per server (the same for every server in these tests).
    return servers_[0]->rejoins();
  }
  // The i-th push every server applied, put together: the whole push as the agent made it.
  struct Whole {
    std::vector<float> values;
    uint32_t minibatches = 0;
    bool resent = false;
  };
  std::vector<Whole> applied() const {
    std::vector<Whole> whole;
    for (const auto& s : servers_) {
      const std::vector<FakeServer::Applied> a = s->applied();
      if (whole.empty()) whole.resize(a.size());
      if (a.size() != whole.size()) {
        throw std::logic_error("the servers applied different numbers of pushes");
      }
      for (size_t i = 0; i < a.size(); ++i) {
        whole[i].values.insert(whole[i].values.end(), a[i].values.begin(), a[i].values.end());
        whole[i].minibatches = a[i].minibatches;
        whole[i].resent = a[i].resent;
      }
    }
    return whole;
  }

 private:
  std::vector<std::unique_ptr<FakeServer>> servers_;
};

// A model whose every minibatch has the same gradient and whose local step adds it to the weights.
class FakeModel : public agent::SyncedModel {
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
    if (!can_step_) return false;
    ++local_steps_;
    for (size_t i = 0; i < weights_.size(); ++i) weights_[i] += gradient_[i];
    if (mean_gradient != nullptr) *mean_gradient = gradient_;
    return true;
  }

  const std::vector<float>& weights() const { return weights_; }
  int local_steps() const { return local_steps_; }
  // A model that cannot learn alone (as the synthetic agent's): StepLocal changes nothing.
  void set_can_step(bool can_step) { can_step_ = can_step; }

 private:
  std::vector<float> weights_, gradient_;
  int local_steps_ = 0;
  bool can_step_ = true;
};

// Time that moves only when a test (or a sleep) moves it.
class FakeClock : public agent::SyncClock {
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

}  // namespace convoy::testing

#endif  // CONVOY_TESTS_AGENT_CLIENT_FAKE_TRANSPORT_H_
