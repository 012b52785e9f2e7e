// The parameter server's admission and batching: pushes queued while a step runs are drained into
// one optimizer step and one version, decided one by one as before (exactly once, lineage,
// staleness), and answered with that version. Each test holds the apply worker on a first push
// whose answer blocks, queues the pushes to combine behind it, then lets it go, so the batch is
// known exactly.
#include <atomic>
#include <cmath>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "param_server/core/parameter_server.h"
#include "tests/catch.h"
#include "tests/support/subprocess.h"

namespace convoy::ps {
namespace {

ParameterServerOptions SgdOptions(uint32_t max_pushes_per_step) {
  ParameterServerOptions o;
  o.model = "tiny";
  o.optimizer.kind = Optimizer::kSgd;
  o.optimizer.momentum = 0;
  o.learning_rate = 0.5;  // A power of two: every step below is exact.
  o.max_pushes_per_step = max_pushes_per_step;
  o.average_horizon = 0;
  return o;
}

PushHeader HeaderOf(const ParameterServer& server, const std::string& agent, uint64_t session,
                    uint64_t sequence, uint32_t minibatches = 1) {
  PushHeader h;
  h.agent_id = agent;
  h.base_version = server.version();
  h.base_incarnation = server.incarnation();
  h.push_session = session;
  h.sequence = sequence;
  h.minibatch_count = minibatches;
  return h;
}

std::vector<float> Filled(const ParameterServer& server, float value) {
  return std::vector<float>(server.model().parameter_count, value);
}

// Answers collected from the worker.
class Answers {
 public:
  PushDone Collect(size_t index) {
    return [this, index](const PushAnswer& outcome, std::vector<float>) {
      absl::MutexLock lock(&mu_);
      if (outcomes_.size() <= index) outcomes_.resize(index + 1);
      outcomes_[index] = outcome;
      ++answered_;
    };
  }
  // Waits for `n` answers and returns them by index.
  std::vector<PushAnswer> Wait(size_t n) {
    absl::MutexLock lock(&mu_);
    want_ = n;
    mu_.Await(absl::Condition(this, &Answers::Enough));
    return outcomes_;
  }

 private:
  bool Enough() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return answered_ >= want_; }

  absl::Mutex mu_;
  std::vector<PushAnswer> outcomes_ ABSL_GUARDED_BY(mu_);
  size_t answered_ ABSL_GUARDED_BY(mu_) = 0;
  size_t want_ ABSL_GUARDED_BY(mu_) = 0;
};

// Holds the apply worker: submits a push whose answer blocks until Release().
class WorkerHold {
 public:
  explicit WorkerHold(ParameterServer& server) {
    server.Submit(HeaderOf(server, "holder", 99, 1), Filled(server, 0.0f),
                  [this](const PushAnswer& outcome, std::vector<float>) {
                    first_ = outcome;
                    held_.Notify();
                    release_.WaitForNotification();
                  });
    held_.WaitForNotification();  // The worker is in the hold's answer: what follows queues.
  }
  void Release() { release_.Notify(); }
  const PushAnswer& first() const { return first_; }

 private:
  absl::Notification held_;
  absl::Notification release_;
  PushAnswer first_;
};

uint64_t Drained(const v1::StatusResponse& status, uint32_t size) {
  const auto it = status.drained_batches().find(size);
  return it == status.drained_batches().end() ? 0 : it->second;
}

TEST_CASE("Pushes queued while a step runs make one step and one version, each answered with it",
          "[batching]") {
  std::unique_ptr<ParameterServer> server = *ParameterServer::Create(SgdOptions(16));
  const std::vector<float> initial = server->Snapshot(v1::NETWORK_ONLINE)->values;
  WorkerHold hold(*server);
  REQUIRE(hold.first().version == 1);  // The holder's zero gradient, stepped alone.
  Answers answers;
  // Gradients 1, 2, 3 and 6 with one minibatch each: their mean is 3.
  const float gradients[] = {1.0f, 2.0f, 3.0f, 6.0f};
  for (size_t i = 0; i < 4; ++i) {
    server->Submit(HeaderOf(*server, "agent-" + std::to_string(i), 10 + i, 1),
                   Filled(*server, gradients[i]), answers.Collect(i));
  }
  hold.Release();
  const std::vector<PushAnswer> outcomes = answers.Wait(4);
  for (const PushAnswer& outcome : outcomes) {
    CHECK(outcome.accepted);
    CHECK(outcome.version == 2);
    CHECK(outcome.step_pushes == 4);
    CHECK(outcome.staleness == 0);  // All decided against version 1, the step's base.
  }
  CHECK(server->version() == 2);
  const std::vector<float> weights = server->Snapshot(v1::NETWORK_ONLINE)->values;
  for (size_t i = 0; i < weights.size(); ++i) CHECK(weights[i] == initial[i] - 0.5f * 3.0f);
  const v1::StatusResponse status = server->Status();
  CHECK(status.updates_applied() == 5);
  CHECK(status.applied_minibatches() == 5);
  CHECK(status.apply_steps() == 2);
  CHECK(Drained(status, 1) == 1);
  CHECK(Drained(status, 4) == 1);
}

TEST_CASE("A batch's gradient is the minibatch-weighted mean of its pushes", "[batching]") {
  std::unique_ptr<ParameterServer> server = *ParameterServer::Create(SgdOptions(16));
  const std::vector<float> initial = server->Snapshot(v1::NETWORK_ONLINE)->values;
  WorkerHold hold(*server);
  Answers answers;
  // 1 minibatch of gradient 4 and 3 of gradient 8: (4 + 24) / 4 = 7.
  server->Submit(HeaderOf(*server, "a", 1, 1, 1), Filled(*server, 4.0f), answers.Collect(0));
  server->Submit(HeaderOf(*server, "b", 2, 1, 3), Filled(*server, 8.0f), answers.Collect(1));
  hold.Release();
  answers.Wait(2);
  const std::vector<float> weights = server->Snapshot(v1::NETWORK_ONLINE)->values;
  for (size_t i = 0; i < weights.size(); ++i) CHECK(weights[i] == initial[i] - 0.5f * 7.0f);
  CHECK(server->Status().applied_minibatches() == 1 + 4);
}

TEST_CASE("Deltas in one batch add, as if each were a step of its own", "[batching]") {
  ParameterServerOptions options = SgdOptions(16);
  options.optimizer.kind = Optimizer::kDelta;
  std::unique_ptr<ParameterServer> server = *ParameterServer::Create(options);
  const std::vector<float> initial = server->Snapshot(v1::NETWORK_ONLINE)->values;
  WorkerHold hold(*server);
  Answers answers;
  for (size_t i = 0; i < 3; ++i) {
    server->Submit(HeaderOf(*server, "agent-" + std::to_string(i), 1 + i, 1),
                   Filled(*server, 0.25f * static_cast<float>(i + 1)), answers.Collect(i));
  }
  hold.Release();
  for (const PushAnswer& outcome : answers.Wait(3)) CHECK(outcome.version == 2);
  const std::vector<float> weights = server->Snapshot(v1::NETWORK_ONLINE)->values;
  for (size_t i = 0; i < weights.size(); ++i) {
    CHECK(weights[i] == ((initial[i] + 0.25f) + 0.5f) + 0.75f);
  }
}

TEST_CASE("With max_pushes_per_step 1 every queued push is a step and a version of its own",
          "[batching]") {
  std::unique_ptr<ParameterServer> server = *ParameterServer::Create(SgdOptions(1));
  WorkerHold hold(*server);
  Answers answers;
  for (size_t i = 0; i < 3; ++i) {
    server->Submit(HeaderOf(*server, "agent-" + std::to_string(i), 1 + i, 1), Filled(*server, 1.0f),
                   answers.Collect(i));
  }
  hold.Release();
  const std::vector<PushAnswer> outcomes = answers.Wait(3);
  for (size_t i = 0; i < 3; ++i) {
    CHECK(outcomes[i].version == 2 + i);
    CHECK(outcomes[i].step_pushes == 1);
    CHECK(outcomes[i].staleness == i);  // Each based on version 1, decided after i steps.
  }
  CHECK(Drained(server->Status(), 1) == 4);
}

TEST_CASE("A batch is at most max_pushes_per_step pushes, in arrival order", "[batching]") {
  std::unique_ptr<ParameterServer> server = *ParameterServer::Create(SgdOptions(2));
  WorkerHold hold(*server);
  Answers answers;
  for (size_t i = 0; i < 5; ++i) {
    server->Submit(HeaderOf(*server, "agent-" + std::to_string(i), 1 + i, 1), Filled(*server, 1.0f),
                   answers.Collect(i));
  }
  hold.Release();
  const std::vector<PushAnswer> outcomes = answers.Wait(5);
  const uint64_t expected[] = {2, 2, 3, 3, 4};
  for (size_t i = 0; i < 5; ++i) CHECK(outcomes[i].version == expected[i]);
  const v1::StatusResponse status = server->Status();
  CHECK(Drained(status, 2) == 2);
  CHECK(Drained(status, 1) == 2);  // The holder's and the last.
}

TEST_CASE(
    "Exactly once within a batch: a repeat gets its first answer, an older sequence is superseded",
    "[batching][exactly_once]") {
  std::unique_ptr<ParameterServer> server = *ParameterServer::Create(SgdOptions(16));
  const std::vector<float> initial = server->Snapshot(v1::NETWORK_ONLINE)->values;
  WorkerHold hold(*server);
  Answers answers;
  server->Submit(HeaderOf(*server, "a", 7, 2), Filled(*server, 2.0f), answers.Collect(0));
  server->Submit(HeaderOf(*server, "a", 7, 2), Filled(*server, 2.0f),
                 answers.Collect(1));  // Again.
  server->Submit(HeaderOf(*server, "a", 7, 1), Filled(*server, 2.0f), answers.Collect(2));  // Late.
  hold.Release();
  const std::vector<PushAnswer> outcomes = answers.Wait(3);
  CHECK(outcomes[0].accepted);
  CHECK_FALSE(outcomes[0].repeated);
  CHECK(outcomes[0].version == 2);
  CHECK(outcomes[1].accepted);
  CHECK(outcomes[1].repeated);
  CHECK(outcomes[1].version == 2);  // The first answer, final once the step was taken.
  CHECK_FALSE(outcomes[2].accepted);
  CHECK(outcomes[2].repeated);
  CHECK(outcomes[2].reason == v1::REJECT_REASON_SUPERSEDED);
  // Applied once: the step's mean is the one push's gradient.
  const std::vector<float> weights = server->Snapshot(v1::NETWORK_ONLINE)->values;
  for (size_t i = 0; i < weights.size(); ++i) CHECK(weights[i] == initial[i] - 0.5f * 2.0f);
  // A retry after the batch is answered from the record the batch left.
  std::vector<float> retry = Filled(*server, 2.0f);
  PushHeader again = HeaderOf(*server, "a", 7, 2);
  const PushAnswer later = server->Apply(again, retry);
  CHECK(later.repeated);
  CHECK(later.version == 2);
  CHECK(server->Status().repeated_pushes() == 3);
}

TEST_CASE("Staleness in a batch is measured against the version before its step", "[batching]") {
  ParameterServerOptions options = SgdOptions(16);
  options.max_staleness = 0;
  std::unique_ptr<ParameterServer> server = *ParameterServer::Create(options);
  WorkerHold hold(*server);
  Answers answers;
  PushHeader old = HeaderOf(*server, "late", 3, 1);
  old.base_version = 0;  // One version behind the step's base (1).
  server->Submit(HeaderOf(*server, "a", 1, 1), Filled(*server, 1.0f), answers.Collect(0));
  server->Submit(HeaderOf(*server, "b", 2, 1), Filled(*server, 1.0f), answers.Collect(1));
  server->Submit(old, Filled(*server, 1.0f), answers.Collect(2));
  hold.Release();
  const std::vector<PushAnswer> outcomes = answers.Wait(3);
  CHECK(outcomes[0].accepted);
  CHECK(outcomes[1].accepted);  // Both on version 1: neither is stale for the other.
  CHECK_FALSE(outcomes[2].accepted);
  CHECK(outcomes[2].reason == v1::REJECT_REASON_STALE);
  CHECK(outcomes[2].staleness == 1);
  CHECK(outcomes[2].version == 2);  // Answered with the version the batch's step made.
  CHECK(outcomes[0].step_pushes == 2);
}

TEST_CASE("The apply log names each push of a step with the step's version, in summation order",
          "[batching]") {
  const std::string dir = testing::MakeTempDir("convoy_batching_log");
  ParameterServerOptions options = SgdOptions(16);
  options.apply_log = dir + "/apply.log";
  std::unique_ptr<ParameterServer> server = *ParameterServer::Create(options);
  const uint64_t incarnation = server->incarnation();
  WorkerHold hold(*server);
  Answers answers;
  server->Submit(HeaderOf(*server, "b", 5, 3, 2), Filled(*server, 1.0f), answers.Collect(0));
  server->Submit(HeaderOf(*server, "a", 4, 8, 1), Filled(*server, 1.0f), answers.Collect(1));
  hold.Release();
  answers.Wait(2);
  server.reset();
  const std::string i = std::to_string(incarnation);
  CHECK(testing::ReadWholeFile(dir + "/apply.log") ==
        "start incarnation=" + i + " version=0\n" +  //
            "apply incarnation=" + i +
            " version=1 agent=holder session=99 sequence=1 minibatches=1 "
            "staleness=0\n" +
            "apply incarnation=" + i +
            " version=2 agent=b session=5 sequence=3 minibatches=2 "
            "staleness=0\n" +
            "apply incarnation=" + i +
            " version=2 agent=a session=4 sequence=8 minibatches=1 "
            "staleness=0\n");
}

TEST_CASE("A server destroyed with pushes queued applies and answers every one of them",
          "[batching]") {
  std::unique_ptr<ParameterServer> server = *ParameterServer::Create(SgdOptions(2));
  std::atomic<int> answered{0};
  std::atomic<int> accepted{0};
  auto hold = std::make_unique<WorkerHold>(*server);
  for (size_t i = 0; i < 7; ++i) {
    server->Submit(HeaderOf(*server, "agent-" + std::to_string(i), 1 + i, 1), Filled(*server, 1.0f),
                   [&](const PushAnswer& outcome, std::vector<float>) {
                     ++answered;
                     if (outcome.accepted) ++accepted;
                   });
  }
  std::thread destroy([&] { server.reset(); });
  hold->Release();
  destroy.join();
  CHECK(answered.load() == 7);
  CHECK(accepted.load() == 7);
}

// Eight threads push all-ones deltas with batching on: however the batches fall, every snapshot
// holds the initial weights plus one whole number everywhere (the pushes applied up to it), the
// version counts the steps, and nothing is lost or applied twice.
TEST_CASE("Concurrent pushes combined into steps keep exact counts and whole snapshots",
          "[batching][concurrency]") {
  constexpr int kPushers = 8;
  constexpr int kPushesEach = 25;
  ParameterServerOptions options = SgdOptions(16);
  options.optimizer.kind = Optimizer::kDelta;
  std::unique_ptr<ParameterServer> server = *ParameterServer::Create(options);
  const std::vector<float> initial = server->Snapshot(v1::NETWORK_ONLINE)->values;
  auto offset_of = [&](const WeightSnapshot& snapshot) -> double {
    const double offset = static_cast<double>(snapshot.values[0]) - initial[0];
    for (size_t i = 0; i < initial.size(); ++i) {
      if (std::abs(static_cast<double>(snapshot.values[i]) - initial[i] - offset) > 0.25) return -1;
    }
    return offset;
  };
  std::atomic<int> torn{0};
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int p = 0; p < kPushers; ++p) {
    threads.emplace_back([&, p] {
      for (int i = 0; i < kPushesEach; ++i) {
        std::shared_ptr<const WeightSnapshot> base = server->Snapshot(v1::NETWORK_ONLINE);
        // At least one push per version.
        if (std::round(offset_of(*base)) < static_cast<double>(base->version)) ++torn;
        std::vector<float> values(initial.size(), 1.0f);
        PushHeader header = HeaderOf(*server, "agent-" + std::to_string(p), 1 + p, 1 + i);
        header.base_version = base->version;
        const PushAnswer outcome = server->Apply(header, values);
        if (!outcome.accepted || outcome.version <= base->version || outcome.step_pushes < 1) {
          ++wrong;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  constexpr uint64_t kTotal = kPushers * kPushesEach;
  CHECK(torn.load() == 0);
  CHECK(wrong.load() == 0);
  std::shared_ptr<const WeightSnapshot> last = server->Snapshot(v1::NETWORK_ONLINE);
  CHECK(std::round(offset_of(*last)) == static_cast<double>(kTotal));
  const v1::StatusResponse status = server->Status();
  CHECK(status.updates_applied() == kTotal);
  CHECK(status.apply_steps() == server->version());
  CHECK(server->version() <= kTotal);
  uint64_t drained = 0;
  for (const auto& [size, batches] : status.drained_batches()) {
    CHECK(size <= 16);
    drained += size * batches;
  }
  CHECK(drained == kTotal);
}

TEST_CASE("Each step's learning rate is the schedule's at the minibatches applied before it",
          "[batching][learning_rate]") {
  ParameterServerOptions o = SgdOptions(1);
  o.learning_rate_decay_minibatches = 4;
  o.final_learning_rate_scale = 0.25;
  std::unique_ptr<ParameterServer> server = *ParameterServer::Create(o);
  // Pushes of 2 minibatches of gradient 1: the steps start at 0, 2, 4 and 6 applied minibatches,
  // where the rate's share is 1, (1 + 0.25) / 2 + 0.75 * cos(pi / 2) / 2 = 0.625, then 0.25.
  const double expected_steps[] = {0.5, 0.3125, 0.125, 0.125};
  for (double expected : expected_steps) {
    const std::vector<float> before = server->Snapshot(v1::NETWORK_ONLINE)->values;
    std::vector<float> g = Filled(*server, 1.0f);
    REQUIRE(server->Apply("a", server->version(), 2, g).accepted);
    const std::vector<float> after = server->Snapshot(v1::NETWORK_ONLINE)->values;
    INFO("step " << server->version());
    CHECK(before[0] - after[0] == Approx(expected).epsilon(1e-5));
    CHECK(before.back() - after.back() == Approx(expected).epsilon(1e-5));
  }
}

TEST_CASE("The fall over minutes follows the training clock between applied steps",
          "[batching][learning_rate]") {
  ParameterServerOptions o = SgdOptions(1);
  o.learning_rate_decay_minutes = 0.005;  // 300 ms of training.
  o.final_learning_rate_scale = 0.25;
  std::unique_ptr<ParameterServer> server = *ParameterServer::Create(o);
  auto step = [&] {
    const float before = server->Snapshot(v1::NETWORK_ONLINE)->values[0];
    std::vector<float> g = Filled(*server, 1.0f);
    REQUIRE(server->Apply("a", server->version(), 1, g).accepted);
    return before - server->Snapshot(v1::NETWORK_ONLINE)->values[0];
  };
  // The clock starts at the first step; the second is taken at its reading then, 0.
  CHECK(step() == Approx(0.5).epsilon(1e-5));
  CHECK(server->Status().learning_rate_scale() == 1.0);
  absl::SleepFor(absl::Milliseconds(400));
  CHECK(step() == Approx(0.5).epsilon(1e-5));
  // 400 ms of training: past the 300 ms of the fall.
  const v1::StatusResponse status = server->Status();
  CHECK(status.training_seconds() >= 0.4);
  CHECK(status.training_seconds() < 5.0);
  CHECK(status.learning_rate_scale() == 0.25);
  CHECK(step() == Approx(0.125).epsilon(1e-5));
}

TEST_CASE("Both falls at once are refused, naming both", "[batching][learning_rate]") {
  ParameterServerOptions o = SgdOptions(1);
  o.learning_rate_decay_minibatches = 100;
  o.learning_rate_decay_minutes = 10;
  absl::StatusOr<std::unique_ptr<ParameterServer>> server = ParameterServer::Create(o);
  REQUIRE(server.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(server.status().message()),
             Catch::Matchers::ContainsSubstring("--learning_rate_decay_minibatches=100") &&
                 Catch::Matchers::ContainsSubstring("--learning_rate_decay_minutes=10"));
  o.learning_rate_decay_minibatches = 0;
  o.optimizer.kind = Optimizer::kDelta;
  server = ParameterServer::Create(o);
  REQUIRE(server.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(
      std::string(server.status().message()),
      Catch::Matchers::ContainsSubstring("--learning_rate_decay_minutes needs a server optimizer"));
}

TEST_CASE("A learning-rate schedule with the delta rule is refused, naming both",
          "[batching][learning_rate]") {
  ParameterServerOptions o = SgdOptions(1);
  o.optimizer.kind = Optimizer::kDelta;
  o.learning_rate_decay_minibatches = 100;
  absl::StatusOr<std::unique_ptr<ParameterServer>> server = ParameterServer::Create(o);
  REQUIRE(server.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(server.status().message()),
             Catch::Matchers::ContainsSubstring("--learning_rate_decay_minibatches") &&
                 Catch::Matchers::ContainsSubstring("--optimizer=delta"));
}

}  // namespace
}  // namespace convoy::ps
