// Many threads pushing, pulling, joining, polling status and checkpointing through the
// ParameterServer core at once, the way convoy_ps's gRPC threads do. Checks exact counts and that
// no pull sees a torn snapshot; under ThreadSanitizer (./convoy test --sanitize=thread) it also
// checks the locking itself.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "param_server/core/parameter_server.h"
#include "param_server/core/push_assembler.h"
#include "tests/catch.h"
#include "tests/support/subprocess.h"

namespace convoy::ps {
namespace {

using testing::MakeTempDir;

// The delta rule with a push of all ones adds exactly 1 to every weight, so with one step per push
// a snapshot of version v holds initial + v everywhere: a snapshot mixing two versions, or stamped
// with the wrong one, shows.
ParameterServerOptions DeltaOptions() {
  ParameterServerOptions o;
  o.model = "tiny";
  o.optimizer.kind = Optimizer::kDelta;
  o.target_update_frequency = 3;
  o.max_pushes_per_step = 1;
  return o;
}

// True when `snapshot` is the initial weights plus its version in every element.
bool Whole(const WeightSnapshot& snapshot, const std::vector<float>& initial) {
  if (snapshot.values.size() != initial.size()) return false;
  const double expected = static_cast<double>(snapshot.version);
  for (size_t i = 0; i < initial.size(); ++i) {
    if (std::abs(static_cast<double>(snapshot.values[i]) - initial[i] - expected) > 0.25)
      return false;
  }
  return true;
}

// Sends a push of all ones through a PushAssembler in `chunks` chunks, as the gRPC service's stream
// does, and returns the assembled tensor.
std::vector<float> AssembleOnes(const ModelInfo& model, const std::string& agent_id,
                                uint64_t base_version, int chunks, bool* ok) {
  const size_t count = model.parameter_count;
  const std::vector<float> ones(count, 1.0f);
  PushAssembler push(model.fingerprint, count);
  const size_t step = (count + chunks - 1) / chunks;
  *ok = true;
  for (size_t offset = 0; offset < count; offset += step) {
    v1::GradientChunk chunk;
    if (offset == 0) {
      chunk.set_agent_id(agent_id);
      chunk.set_base_version(base_version);
      chunk.set_encoding(v1::ENCODING_FP32);
      chunk.set_minibatch_count(1);
      chunk.set_model_fingerprint(model.fingerprint);
      chunk.set_total_elements(count);
    }
    chunk.set_offset(offset);
    EncodeTensor(ones.data() + offset, std::min(step, count - offset), TensorEncoding::kFp32,
                 chunk.mutable_data());
    *ok = *ok && push.Add(chunk).ok();
  }
  *ok = *ok && push.Finish().ok();
  return std::move(push.values());
}

TEST_CASE("Concurrent pushes and pulls keep exact counts and whole snapshots",
          "[parameter_server][concurrency]") {
  constexpr int kPushers = 4;
  constexpr int kPushesEach = 40;
  constexpr int kPullers = 2;
  const std::string dir = MakeTempDir("convoy_ps_concurrency");
  ParameterServerOptions options = DeltaOptions();
  options.checkpoint_dir = dir;
  options.keep_checkpoints = 2;
  options.checkpoint_every_updates = 25;
  std::unique_ptr<ParameterServer> server = *ParameterServer::Create(options);
  server->StartPeriodicTasks();
  const std::vector<float> initial = server->Snapshot(v1::NETWORK_ONLINE)->values;

  std::atomic<bool> pushing{true};
  std::atomic<int> torn{0};
  std::atomic<int> bad_pushes{0};
  std::atomic<int> bad_joins{0};
  std::atomic<int> not_monotonic{0};
  std::atomic<int> checkpoint_errors{0};
  std::atomic<int> pulls{0};
  std::vector<std::thread> threads;

  for (int p = 0; p < kPushers; ++p) {
    threads.emplace_back([&, p] {
      const std::string agent = absl::StrCat("agent-", p);
      v1::JoinRequest join;
      join.set_agent_id(agent);
      join.set_agent_index(static_cast<uint32_t>(p));
      join.set_hostname("localhost");
      join.set_model_fingerprint(server->model().fingerprint);
      if (!server->Join(join).ok()) ++bad_joins;
      for (int i = 0; i < kPushesEach; ++i) {
        std::shared_ptr<const WeightSnapshot> base = server->Snapshot(v1::NETWORK_ONLINE);
        if (!Whole(*base, initial)) ++torn;
        server->CountPull(agent, false);
        ++pulls;
        bool assembled = false;
        std::vector<float> values =
            AssembleOnes(server->model(), agent, base->version, 1 + i % 3, &assembled);
        server->CountBytes(values.size() * sizeof(float), 0);
        const PushAnswer outcome = server->Apply(agent, base->version, 1, values);
        if (!assembled || !outcome.accepted || outcome.version <= base->version) ++bad_pushes;
      }
    });
  }
  for (int r = 0; r < kPullers; ++r) {
    threads.emplace_back([&, r] {
      const std::string agent = absl::StrCat("puller-", r);
      const v1::Network network = r % 2 == 0 ? v1::NETWORK_ONLINE : v1::NETWORK_TARGET;
      while (pushing.load()) {
        std::shared_ptr<const WeightSnapshot> s = server->Snapshot(network);
        if (!Whole(*s, initial)) ++torn;
        server->CountPull(agent, false);
        ++pulls;
      }
    });
  }
  // Status, run configs and on-demand checkpoints race the pushes and the periodic checkpoint
  // thread.
  threads.emplace_back([&] {
    uint64_t last_version = 0;
    uint64_t last_updates = 0;
    while (pushing.load()) {
      const v1::StatusResponse status = server->Status();
      if (status.version() < last_version || status.updates_applied() < last_updates)
        ++not_monotonic;
      last_version = status.version();
      last_updates = status.updates_applied();
      server->RunConfigFor(static_cast<uint32_t>(last_version % kPushers));
      absl::StatusOr<std::string> path = server->Checkpoint();
      if (!path.ok()) ++checkpoint_errors;
      absl::SleepFor(absl::Milliseconds(5));  // Pacing, so checkpoints do not crowd out the pushes.
    }
  });

  for (int p = 0; p < kPushers; ++p) threads[p].join();
  pushing = false;
  for (size_t t = kPushers; t < threads.size(); ++t) threads[t].join();

  CHECK(torn.load() == 0);
  CHECK(bad_pushes.load() == 0);
  CHECK(bad_joins.load() == 0);
  CHECK(not_monotonic.load() == 0);
  CHECK(checkpoint_errors.load() == 0);
  constexpr uint64_t kTotal = kPushers * kPushesEach;
  CHECK(server->version() == kTotal);
  std::shared_ptr<const WeightSnapshot> last = server->Snapshot(v1::NETWORK_ONLINE);
  CHECK(last->version == kTotal);
  CHECK(Whole(*last, initial));
  CHECK(Whole(*server->Snapshot(v1::NETWORK_TARGET), initial));

  const v1::StatusResponse status = server->Status();
  CHECK(status.updates_applied() == kTotal);
  CHECK(status.applied_minibatches() == kTotal);
  CHECK(status.pulls_served() == static_cast<uint64_t>(pulls.load()));
  CHECK(status.bytes_in() == kTotal * server->model().parameter_count * sizeof(float));
  CHECK(status.rejections().empty());
  CHECK(status.checkpoints_written() >= 1);
  CHECK(status.checkpoint_failures() == 0);
  int pushing_agents = 0;
  for (const v1::AgentStatus& agent : status.agents()) {
    if (agent.agent_id().rfind("agent-", 0) != 0) continue;
    ++pushing_agents;
    CHECK(agent.pushes_accepted() == kPushesEach);
    CHECK(agent.pushes_rejected() == 0);
  }
  CHECK(pushing_agents == kPushers);
}

TEST_CASE("Concurrent stale pushes are rejected and counted exactly",
          "[parameter_server][concurrency]") {
  constexpr int kPushers = 4;
  constexpr int kPushesEach = 30;
  ParameterServerOptions options = DeltaOptions();
  options.max_staleness = 0;  // Only a push based on the newest version is applied.
  std::unique_ptr<ParameterServer> server = *ParameterServer::Create(options);
  const std::vector<float> initial = server->Snapshot(v1::NETWORK_ONLINE)->values;

  std::atomic<uint64_t> accepted{0};
  std::atomic<uint64_t> stale{0};
  std::atomic<int> wrong{0};
  std::atomic<int> torn{0};
  std::vector<std::thread> threads;
  for (int p = 0; p < kPushers; ++p) {
    threads.emplace_back([&, p] {
      const std::string agent = absl::StrCat("agent-", p);
      for (int i = 0; i < kPushesEach; ++i) {
        std::shared_ptr<const WeightSnapshot> base = server->Snapshot(v1::NETWORK_ONLINE);
        if (!Whole(*base, initial)) ++torn;
        std::vector<float> values(base->values.size(), 1.0f);
        const PushAnswer outcome = server->Apply(agent, base->version, 1, values);
        if (outcome.accepted) {
          ++accepted;
          if (outcome.version != base->version + 1 || outcome.staleness != 0) ++wrong;
        } else if (outcome.reason == v1::REJECT_REASON_STALE) {
          ++stale;
          if (outcome.staleness == 0 || outcome.version <= base->version) ++wrong;
        } else {
          ++wrong;
        }
        // Malformed pushes the service rejects before Apply are counted from the same threads.
        if (i % 5 == 0) server->CountRejection(agent, v1::REJECT_REASON_NON_FINITE);
      }
    });
  }
  for (std::thread& t : threads) t.join();

  constexpr uint64_t kTotal = kPushers * kPushesEach;
  CHECK(wrong.load() == 0);
  CHECK(torn.load() == 0);
  CHECK(accepted.load() + stale.load() == kTotal);
  CHECK(accepted.load() >= 1);
  CHECK(server->version() == accepted.load());
  CHECK(Whole(*server->Snapshot(v1::NETWORK_ONLINE), initial));
  const v1::StatusResponse status = server->Status();
  CHECK(status.updates_applied() == accepted.load());
  const auto& rejections = status.rejections();
  const uint64_t stale_counted =
      rejections.count("REJECT_REASON_STALE") ? rejections.at("REJECT_REASON_STALE") : 0;
  CHECK(stale_counted == stale.load());
  CHECK(rejections.at("REJECT_REASON_NON_FINITE") == kPushers * ((kPushesEach + 4) / 5));
  uint64_t per_agent_accepted = 0;
  uint64_t per_agent_rejected = 0;
  for (const v1::AgentStatus& agent : status.agents()) {
    per_agent_accepted += agent.pushes_accepted();
    per_agent_rejected += agent.pushes_rejected();
  }
  CHECK(per_agent_accepted == accepted.load());
  CHECK(per_agent_rejected == stale.load() + kPushers * ((kPushesEach + 4) / 5));
}

}  // namespace
}  // namespace convoy::ps
