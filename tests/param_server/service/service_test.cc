// Integration tests of convoy_ps's gRPC service over loopback, with a real server and real clients.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "common/wire/grpc_status.h"
#include "common/wire/tensor_chunk.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "param_server/core/optimizer.h"
#include "param_server/core/weight_store.h"
#include "param_server/service/pull_cache.h"
#include "tests/catch.h"
#include "tests/param_server/service/loopback_server.h"
#include "tests/support/subprocess.h"

namespace convoy::ps {
namespace {

using testing::LoopbackServer;

ParameterServerOptions Options(const std::string& model = "tiny") {
  ParameterServerOptions o;
  o.model = model;
  return o;
}

std::vector<float> RandomVector(size_t n, uint32_t seed, float scale = 0.01f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

uint64_t Rejections(const v1::StatusResponse& status, v1::RejectReason reason) {
  auto it = status.rejections().find(v1::RejectReason_Name(reason));
  return it == status.rejections().end() ? 0 : it->second;
}

TEST_CASE("Join hands out the run configuration the server owns", "[service]") {
  ParameterServerOptions o = Options();
  o.batch_size = 64;
  o.batch_update_frequency = 7;
  o.learning_rate = 5e-4;
  LoopbackServer ps(o);
  agent::PsClient client(ps.ClientOptions("agent-1"));
  absl::StatusOr<v1::JoinResponse> joined = client.Join();
  REQUIRE(joined.ok());
  CHECK(joined->config().model_name() == "tiny");
  CHECK(joined->config().batch_size() == 64);
  CHECK(joined->config().batch_update_frequency() == 7);
  CHECK(joined->config().learning_rate() == Approx(5e-4));
  CHECK(joined->config().epsilon() == 1.0);
  CHECK(joined->parameter_count() == ps.server->core().model().parameter_count);
  CHECK(joined->version() == 0);
  CHECK(joined->incarnation() != 0);
  const v1::StatusResponse status = ps.Status();
  REQUIRE(status.agents_size() == 1);
  CHECK(status.agents(0).agent_id() == "agent-1");
  CHECK(status.agents(0).hostname() == "test");
}

TEST_CASE("Join with another model's fingerprint fails naming both", "[service]") {
  LoopbackServer ps(Options());
  agent::PsClientOptions o = ps.ClientOptions("agent-1");
  o.model_fingerprint = DescribeModel("nature")->fingerprint;
  absl::StatusOr<v1::JoinResponse> joined = agent::PsClient(o).Join();
  REQUIRE(joined.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(joined.status().message()),
             Catch::Matchers::ContainsSubstring(o.model_fingerprint) &&
                 Catch::Matchers::ContainsSubstring(ps.server->core().model().fingerprint));
}

TEST_CASE("The health service reports SERVING once weights are ready", "[service]") {
  LoopbackServer ps(Options());
  auto health = grpc::health::v1::Health::NewStub(ps.channel);
  for (const char* service : {"", kParameterServerServiceName}) {
    grpc::ClientContext context;
    grpc::health::v1::HealthCheckRequest request;
    request.set_service(service);
    grpc::health::v1::HealthCheckResponse response;
    REQUIRE(health->Check(&context, request, &response).ok());
    CHECK(response.status() == grpc::health::v1::HealthCheckResponse::SERVING);
  }
}

TEST_CASE("GetStatus answers an empty request", "[service]") {
  LoopbackServer ps(Options());
  grpc::ClientContext context;
  v1::StatusResponse status;
  REQUIRE(ps.stub->GetStatus(&context, v1::StatusRequest(), &status).ok());
  CHECK(status.version() == 0);
  CHECK(status.model_name() == "tiny");
  CHECK(status.parameter_count() > 0);
}

TEST_CASE("Pull sends weights once, then says not newer", "[service]") {
  LoopbackServer ps(Options("cookbook"));  // Several chunks.
  agent::PsClient client(ps.ClientOptions("a"));
  std::vector<float> weights;
  absl::StatusOr<agent::PullResult> first = client.Pull(0, 0, v1::NETWORK_ONLINE, &weights);
  REQUIRE(first.ok());
  CHECK(first->updated);
  CHECK(weights == ps.server->core().Snapshot(v1::NETWORK_ONLINE)->values);
  absl::StatusOr<agent::PullResult> second =
      client.Pull(first->version, first->incarnation, v1::NETWORK_ONLINE, &weights);
  REQUIRE(second.ok());
  CHECK_FALSE(second->updated);
  CHECK(ps.Status().pulls_not_newer() == 1);
  // Holding version 0 of another incarnation (a restarted server) still gets weights.
  CHECK(client.Pull(first->version, first->incarnation + 1, v1::NETWORK_ONLINE, &weights)->updated);
}

TEST_CASE("bf16 pulls and pushes carry the weights within bf16 precision", "[service]") {
  LoopbackServer ps(Options());
  agent::PsClientOptions o = ps.ClientOptions("a");
  o.pull_encoding = TensorEncoding::kBf16;
  o.push_encoding = TensorEncoding::kBf16;
  agent::PsClient client(o);
  std::vector<float> weights;
  REQUIRE(client.Pull(0, 0, v1::NETWORK_ONLINE, &weights).ok());
  const std::vector<float>& exact = ps.server->core().Snapshot(v1::NETWORK_ONLINE)->values;
  REQUIRE(weights.size() == exact.size());
  for (size_t i = 0; i < exact.size(); ++i) {
    REQUIRE(std::fabs(weights[i] - exact[i]) <= std::fabs(exact[i]) / 256 + 1e-30);
  }
  std::vector<float> g(exact.size(), 0.25f);
  absl::StatusOr<PushAnswer> pushed = client.Push(g.data(), g.size(), 0, 1);
  REQUIRE(pushed.ok());
  CHECK(pushed->accepted);
}

TEST_CASE("Concurrent pushers: every push is counted, and SGD equals sequential application",
          "[service][concurrency]") {
  ParameterServerOptions o = Options("cookbook");
  o.optimizer.kind = Optimizer::kSgd;
  o.learning_rate = 0.01;
  o.optimizer.momentum = 0.9;
  o.max_staleness = 2;        // Some pushes will be stale under contention.
  o.max_pushes_per_step = 1;  // One version per push (batching: the test after this one).
  LoopbackServer ps(o);
  const std::vector<float> initial = ps.server->core().Snapshot(v1::NETWORK_ONLINE)->values;
  const size_t n = initial.size();
  constexpr int kThreads = 6, kPushes = 8;
  std::mutex mu;
  std::map<uint64_t, std::vector<float>> accepted;  // Resulting version -> gradient.
  std::atomic<int> sent{0}, rejected{0}, errors{0}, wrong_reasons{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      agent::PsClient client(ps.ClientOptions("pusher-" + std::to_string(t)));
      testing::PulledWeights newest;
      for (int i = 0; i < kPushes; ++i) {
        if (!newest.Refresh(client).ok()) {
          ++errors;
          continue;
        }
        std::vector<float> g = RandomVector(n, 1000 * t + i);
        absl::StatusOr<PushAnswer> pushed = client.Push(g.data(), n, newest.version, 1);
        ++sent;
        if (!pushed.ok()) {
          ++errors;
        } else if (pushed->accepted) {
          std::lock_guard<std::mutex> lock(mu);
          accepted.emplace(pushed->version, std::move(g));
        } else {
          if (pushed->reason != v1::REJECT_REASON_STALE)
            ++wrong_reasons;  // Asserted after the join.
          ++rejected;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  REQUIRE(errors.load() == 0);
  CHECK(wrong_reasons.load() == 0);  // Every refusal was for staleness.
  const v1::StatusResponse status = ps.Status();
  CHECK(sent.load() == kThreads * kPushes);
  CHECK(accepted.size() + rejected.load() == static_cast<size_t>(sent.load()));
  CHECK(status.updates_applied() == accepted.size());
  CHECK(Rejections(status, v1::REJECT_REASON_STALE) == static_cast<uint64_t>(rejected.load()));
  CHECK(status.version() == accepted.size());

  // Versions 1..N, each produced by exactly one accepted push; replaying them in that order with
  // the same optimizer gives the server's weights bit for bit.
  std::vector<float> replay = initial;
  const OptimizerOptions sgd = OptimizerOptionsOf(o);
  auto optimizer = *FlatOptimizer::Create(sgd, replay.data(), n);
  uint64_t expected_version = 1;
  for (auto& [version, gradient] : accepted) {
    REQUIRE(version == expected_version++);
    optimizer->Apply(gradient.data(), 1.0);
  }
  CHECK(replay == ps.server->core().Snapshot(v1::NETWORK_ONLINE)->values);
}

TEST_CASE(
    "Concurrent pushers with batching: the apply log's steps, replayed, are the server's weights",
    "[service][concurrency][batching]") {
  const std::string dir = testing::MakeTempDir("convoy_service_batching");
  ParameterServerOptions o = Options("cookbook");
  o.optimizer.kind = Optimizer::kSgd;
  o.learning_rate = 0.01;
  o.optimizer.momentum = 0.9;
  o.apply_log = dir + "/apply.log";
  LoopbackServer ps(o);
  const std::vector<float> initial = ps.server->core().Snapshot(v1::NETWORK_ONLINE)->values;
  const size_t n = initial.size();
  constexpr int kThreads = 6, kPushes = 8;
  std::mutex mu;
  std::map<std::pair<uint64_t, uint64_t>, std::vector<float>> sent;  // (session, sequence) -> g.
  std::atomic<int> errors{0}, refused{0}, combined{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      agent::PsClient client(ps.ClientOptions("pusher-" + std::to_string(t)));
      testing::PulledWeights newest;
      for (int i = 0; i < kPushes; ++i) {
        if (!newest.Refresh(client).ok()) {
          ++errors;
          continue;
        }
        std::vector<float> g = RandomVector(n, 1000 * t + i);
        const std::pair<uint64_t, uint64_t> key{client.push_session(), client.next_sequence()};
        {
          std::lock_guard<std::mutex> lock(mu);
          sent.emplace(key, g);
        }
        absl::StatusOr<PushAnswer> pushed =
            client.Push(g.data(), n, newest.version, 1 + (i % 3), newest.incarnation);
        if (!pushed.ok()) {
          ++errors;
        } else if (!pushed->accepted) {
          ++refused;
        } else if (pushed->step_pushes > 1) {
          ++combined;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  REQUIRE(errors.load() == 0);
  CHECK(refused.load() == 0);  // No --max_staleness.
  const v1::StatusResponse status = ps.Status();
  CHECK(status.updates_applied() == kThreads * kPushes);
  CHECK(status.apply_steps() == status.version());
  INFO(combined.load() << " pushes were answered from a step that combined several");

  // Each version's "apply" lines, in the order the step summed them.
  std::map<uint64_t, std::vector<std::pair<std::pair<uint64_t, uint64_t>, uint32_t>>> steps;
  for (absl::string_view line :
       absl::StrSplit(testing::ReadWholeFile(o.apply_log), '\n', absl::SkipEmpty())) {
    if (!absl::StartsWith(line, "apply ")) continue;
    std::map<std::string, std::string> fields;
    for (absl::string_view field : absl::StrSplit(line, ' ', absl::SkipEmpty())) {
      const std::pair<std::string, std::string> kv = absl::StrSplit(field, absl::MaxSplits('=', 1));
      fields[kv.first] = kv.second;
    }
    steps[std::stoull(fields["version"])].push_back(
        {{std::stoull(fields["session"]), std::stoull(fields["sequence"])},
         static_cast<uint32_t>(std::stoul(fields["minibatches"]))});
  }
  REQUIRE(steps.size() == status.version());
  std::vector<float> replay = initial;
  auto optimizer = *FlatOptimizer::Create(OptimizerOptionsOf(o), replay.data(), n);
  uint64_t expected_version = 1;
  size_t replayed = 0;
  for (auto& [version, pushes] : steps) {
    REQUIRE(version == expected_version++);
    std::vector<std::vector<float>> gradients;
    std::vector<StepInput> inputs;
    for (const auto& [key, minibatches] : pushes) {
      REQUIRE(sent.count(key) == 1);
      gradients.push_back(sent[key]);
    }
    for (size_t i = 0; i < pushes.size(); ++i) {
      inputs.push_back(StepInput{gradients[i].data(), pushes[i].second, 1.0});
    }
    optimizer->Step(inputs);
    replayed += pushes.size();
  }
  CHECK(replayed == static_cast<size_t>(kThreads * kPushes));
  const std::vector<float>& served = ps.server->core().Snapshot(v1::NETWORK_ONLINE)->values;
  size_t differ = 0;
  for (size_t i = 0; i < n; ++i) differ += replay[i] != served[i];
  CHECK(differ == 0);
}

TEST_CASE(
    "With batching a pull never sees a torn snapshot: one whole number of pushes in every weight",
    "[service][concurrency][batching]") {
  ParameterServerOptions o = Options("cookbook");
  o.optimizer.kind = Optimizer::kDelta;  // w += 1 per push: a snapshot is initial + pushes applied.
  LoopbackServer ps(o);
  const std::vector<float> initial = ps.server->core().Snapshot(v1::NETWORK_ONLINE)->values;
  const size_t n = initial.size();
  constexpr int kPushers = 4, kPushesEach = 12;
  std::atomic<bool> done{false};
  std::atomic<int> failed{0}, torn{0}, pulls{0};
  std::vector<std::thread> pullers;
  for (int p = 0; p < 2; ++p) {
    pullers.emplace_back([&, p] {
      agent::PsClient client(ps.ClientOptions("puller-" + std::to_string(p)));
      std::vector<float> weights;
      while (!done.load()) {
        absl::StatusOr<agent::PullResult> r = client.Pull(0, 0, v1::NETWORK_ONLINE, &weights);
        if (!r.ok()) {
          ++failed;
          return;
        }
        ++pulls;
        // One whole number k of pushes, the same in every weight (within float rounding).
        const double k = std::round(static_cast<double>(weights[0]) - initial[0]);
        bool whole = k >= static_cast<double>(r->version);
        for (size_t i = 0; i < n && whole; ++i) {
          whole = std::abs(static_cast<double>(weights[i]) - initial[i] - k) < 0.25;
        }
        if (!whole) ++torn;
      }
    });
  }
  std::vector<std::thread> pushers;
  for (int t = 0; t < kPushers; ++t) {
    pushers.emplace_back([&, t] {
      agent::PsClient client(ps.ClientOptions("pusher-" + std::to_string(t)));
      const std::vector<float> ones(n, 1.0f);
      for (int i = 0; i < kPushesEach; ++i) {
        absl::StatusOr<PushAnswer> pushed = client.Push(ones.data(), n, 0, 1);
        if (!pushed.ok() || !pushed->accepted) ++failed;
      }
    });
  }
  for (std::thread& t : pushers) t.join();
  done = true;
  for (std::thread& t : pullers) t.join();
  CHECK(failed.load() == 0);
  CHECK(torn.load() == 0);
  CHECK(pulls.load() >= 2);
  const std::vector<float>& last = ps.server->core().Snapshot(v1::NETWORK_ONLINE)->values;
  CHECK(std::abs(static_cast<double>(last[n - 1]) - initial[n - 1] - kPushers * kPushesEach) <
        0.25);
}

TEST_CASE("A pull never sees a torn snapshot while pushes are applied", "[service][concurrency]") {
  ParameterServerOptions o = Options("cookbook");
  o.optimizer.kind = Optimizer::kDelta;  // w += 1 per push: every version has a known state.
  o.max_pushes_per_step = 1;             // One version per push.
  LoopbackServer ps(o);
  const std::vector<float> initial = ps.server->core().Snapshot(v1::NETWORK_ONLINE)->values;
  const size_t n = initial.size();
  constexpr int kPushes = 60;
  std::atomic<bool> done{false};
  // Counted here and asserted on the test's thread: Catch2's assertions are not thread-safe (v3.7
  // aborts).
  std::atomic<int> failed_pulls{0}, failed_pushes{0};
  std::mutex mu;
  std::map<uint64_t, std::vector<float>> pulled;
  std::vector<std::thread> pullers;
  for (int p = 0; p < 2; ++p) {
    pullers.emplace_back([&, p] {
      agent::PsClient client(ps.ClientOptions("puller-" + std::to_string(p)));
      std::vector<float> weights;
      while (!done.load()) {
        absl::StatusOr<agent::PullResult> r = client.Pull(0, 0, v1::NETWORK_ONLINE, &weights);
        if (!r.ok()) {
          ++failed_pulls;
          return;
        }
        std::lock_guard<std::mutex> lock(mu);
        if (pulled.size() < 30) pulled.emplace(r->version, weights);
      }
    });
  }
  std::vector<std::thread> pushers;
  for (int t = 0; t < 2; ++t) {
    pushers.emplace_back([&, t] {
      agent::PsClient client(ps.ClientOptions("pusher-" + std::to_string(t)));
      const std::vector<float> ones(n, 1.0f);
      for (int i = 0; i < kPushes / 2; ++i) {
        absl::StatusOr<PushAnswer> pushed = client.Push(ones.data(), n, 0, 1);
        if (!pushed.ok() || !pushed->accepted) ++failed_pushes;
      }
    });
  }
  for (std::thread& t : pushers) t.join();
  done = true;
  for (std::thread& t : pullers) t.join();
  REQUIRE(failed_pulls == 0);
  REQUIRE(failed_pushes == 0);
  REQUIRE(pulled.size() >= 2);
  std::vector<float> state = initial;
  size_t checked = 0;
  for (uint64_t version = 0; version <= kPushes; ++version) {
    if (version > 0) {
      for (float& x : state) x += 1.0f;
    }
    auto it = pulled.find(version);
    if (it == pulled.end()) continue;
    INFO("version " << version);
    CHECK(it->second == state);
    ++checked;
  }
  CHECK(checked == pulled.size());
}

// Streams `chunks` as one PushGradients call through the raw stub.
grpc::Status RawPush(v1::ParameterServer::Stub& stub, const std::vector<v1::GradientChunk>& chunks,
                     v1::PushResponse* response) {
  grpc::ClientContext context;
  auto writer = stub.PushGradients(&context, response);
  for (const v1::GradientChunk& c : chunks) {
    if (!writer->Write(c)) break;
  }
  writer->WritesDone();
  return writer->Finish();
}

std::vector<v1::GradientChunk> Chunked(const ModelInfo& model, const std::vector<float>& values,
                                       size_t per_chunk) {
  std::vector<v1::GradientChunk> chunks;
  for (size_t offset = 0; offset < values.size(); offset += per_chunk) {
    v1::GradientChunk c;
    if (offset == 0) {
      c.set_agent_id("raw");
      c.set_encoding(v1::ENCODING_FP32);
      c.set_minibatch_count(1);
      c.set_model_fingerprint(model.fingerprint);
      c.set_total_elements(values.size());
    }
    c.set_offset(offset);
    const size_t count = std::min(per_chunk, values.size() - offset);
    EncodeTensor(values.data() + offset, count, TensorEncoding::kFp32, c.mutable_data());
    chunks.push_back(std::move(c));
  }
  return chunks;
}

TEST_CASE("Every bad push gets its status, is counted by reason, and changes nothing",
          "[service][validation]") {
  LoopbackServer ps(Options());
  const ModelInfo& model = ps.server->core().model();
  const std::vector<float> before = ps.server->core().Snapshot(v1::NETWORK_ONLINE)->values;
  const std::vector<float> good(model.parameter_count, 0.1f);
  const size_t quarter = model.parameter_count / 4 + 1;
  v1::PushResponse response;

  struct Case {
    const char* name;
    std::vector<v1::GradientChunk> chunks;
    grpc::StatusCode code;
    v1::RejectReason reason;
  };
  std::vector<Case> cases;
  {
    auto chunks = Chunked(model, good, quarter);
    chunks[0].set_total_elements(model.parameter_count + 1);
    cases.push_back({"wrong total size", chunks, grpc::StatusCode::INVALID_ARGUMENT,
                     v1::REJECT_REASON_WRONG_SIZE});
  }
  {
    auto chunks = Chunked(model, good, quarter);
    chunks[2].set_offset(chunks[2].offset() - 5);
    cases.push_back({"overlapping chunks", chunks, grpc::StatusCode::INVALID_ARGUMENT,
                     v1::REJECT_REASON_BAD_CHUNKS});
  }
  {
    auto chunks = Chunked(model, good, quarter);
    chunks.erase(chunks.begin() + 1);
    cases.push_back({"a missing chunk", chunks, grpc::StatusCode::INVALID_ARGUMENT,
                     v1::REJECT_REASON_BAD_CHUNKS});
  }
  {
    auto chunks = Chunked(model, good, quarter);
    chunks.pop_back();
    cases.push_back({"a missing last chunk", chunks, grpc::StatusCode::INVALID_ARGUMENT,
                     v1::REJECT_REASON_BAD_CHUNKS});
  }
  for (float bad :
       {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    std::vector<float> values = good;
    values[values.size() / 2] = bad;
    cases.push_back({std::isnan(bad) ? "NaN" : "Inf", Chunked(model, values, quarter),
                     grpc::StatusCode::INVALID_ARGUMENT, v1::REJECT_REASON_NON_FINITE});
  }
  {
    auto chunks = Chunked(model, good, quarter);
    chunks[0].set_model_fingerprint("cookbook-0000000000000000");
    cases.push_back({"an unknown fingerprint", chunks, grpc::StatusCode::FAILED_PRECONDITION,
                     v1::REJECT_REASON_FINGERPRINT_MISMATCH});
  }
  {
    auto chunks = Chunked(model, good, quarter);
    chunks[0].set_encoding(static_cast<v1::Encoding>(7));
    cases.push_back({"an unknown encoding", chunks, grpc::StatusCode::INVALID_ARGUMENT,
                     v1::REJECT_REASON_UNKNOWN_ENCODING});
  }
  cases.push_back(
      {"an empty push", {}, grpc::StatusCode::INVALID_ARGUMENT, v1::REJECT_REASON_EMPTY});

  for (const Case& c : cases) {
    INFO(c.name);
    const uint64_t counted_before = Rejections(ps.Status(), c.reason);
    grpc::Status status = RawPush(*ps.stub, c.chunks, &response);
    CHECK(status.error_code() == c.code);
    CHECK_FALSE(status.error_message().empty());
    CHECK(Rejections(ps.Status(), c.reason) == counted_before + 1);
    CHECK(ps.Status().version() == 0);
  }
  CHECK(ps.server->core().Snapshot(v1::NETWORK_ONLINE)->values == before);
  // The server still takes a good push afterwards.
  REQUIRE(RawPush(*ps.stub, Chunked(model, good, quarter), &response).ok());
  CHECK(response.accepted());
  CHECK(response.version() == 1);
}

TEST_CASE("A push stream cancelled halfway is never applied", "[service][validation]") {
  LoopbackServer ps(Options("cookbook"));
  const ModelInfo& model = ps.server->core().model();
  const std::vector<float> good(model.parameter_count, 0.1f);
  auto chunks = Chunked(model, good, ElementsPerChunk(TensorEncoding::kFp32));
  REQUIRE(chunks.size() >= 3);
  {
    grpc::ClientContext context;
    v1::PushResponse response;
    auto writer = ps.stub->PushGradients(&context, &response);
    REQUIRE(writer->Write(chunks[0]));
    REQUIRE(writer->Write(chunks[1]));
    context.TryCancel();
    CHECK(writer->Finish().error_code() == grpc::StatusCode::CANCELLED);
  }
  // The server notices on its own schedule; wait for the rejection to be counted.
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  uint64_t counted = 0;
  while (absl::Now() < deadline) {
    const v1::StatusResponse status = ps.Status();
    counted = Rejections(status, v1::REJECT_REASON_CANCELLED) +
              Rejections(status, v1::REJECT_REASON_BAD_CHUNKS);
    if (counted > 0) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  CHECK(counted == 1);
  CHECK(ps.Status().version() == 0);
  CHECK(ps.Status().updates_applied() == 0);
}

TEST_CASE("A message over the chunk limit is refused by the transport", "[service][validation]") {
  LoopbackServer ps(Options());
  v1::GradientChunk chunk;
  chunk.set_model_fingerprint(ps.server->core().model().fingerprint);
  chunk.mutable_data()->assign(2 << 20, '\0');
  v1::PushResponse response;
  CHECK(RawPush(*ps.stub, {chunk}, &response).error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
  CHECK(ps.Status().version() == 0);
}

TEST_CASE("Stale and ahead pushes are rejected in-band with the current version", "[service]") {
  ParameterServerOptions o = Options();
  o.max_staleness = 1;
  LoopbackServer ps(o);
  agent::PsClient client(ps.ClientOptions("a"));
  const std::vector<float> g(ps.server->core().model().parameter_count, 0.01f);
  for (int i = 0; i < 3; ++i) REQUIRE(client.Push(g.data(), g.size(), i, 1)->accepted);
  absl::StatusOr<PushAnswer> stale = client.Push(g.data(), g.size(), 1, 1);
  REQUIRE(stale.ok());
  CHECK_FALSE(stale->accepted);
  CHECK(stale->reason == v1::REJECT_REASON_STALE);
  CHECK(stale->staleness == 2);
  CHECK(stale->version == 3);
  absl::StatusOr<PushAnswer> ahead = client.Push(g.data(), g.size(), 9, 1);
  REQUIRE(ahead.ok());
  CHECK(ahead->reason == v1::REJECT_REASON_AHEAD);
  CHECK(ps.Status().version() == 3);
  const v1::StatusResponse status = ps.Status();
  REQUIRE(status.agents_size() == 1);
  CHECK(status.agents(0).pushes_accepted() == 3);
  CHECK(status.agents(0).pushes_rejected() == 2);
}

TEST_CASE("A push whose reply is lost after the apply is retried and applied once",
          "[service][exactly_once]") {
  ParameterServerOptions o = Options();
  o.optimizer.kind = Optimizer::kSgd;
  o.optimizer.momentum = 0;
  LoopbackServer ps(o);
  std::atomic<int> dropped{0};
  // The first reply after an apply never reaches the client, as when the connection drops right
  // then.
  ps.server->service().SetAfterApplyHookForTesting([&](const PushAnswer&) {
    if (dropped.fetch_add(1) == 0) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "reply lost");
    return grpc::Status::OK;
  });
  const std::vector<float> before = ps.server->core().Snapshot(v1::NETWORK_ONLINE)->values;
  agent::PsClient client(ps.ClientOptions("a"));
  const std::vector<float> g = RandomVector(before.size(), 3);
  absl::StatusOr<PushAnswer> pushed =
      client.Push(g.data(), g.size(), 0, 1, ps.Status().incarnation());
  REQUIRE(pushed.ok());
  CHECK(dropped == 2);  // The first attempt and its retry both reached the server.
  CHECK(pushed->accepted);
  CHECK(pushed->repeated);  // The retry got the first attempt's answer.
  CHECK(pushed->version == 1);
  const v1::StatusResponse status = ps.Status();
  CHECK(status.version() == 1);
  CHECK(status.updates_applied() == 1);
  CHECK(status.repeated_pushes() == 1);
  // The weights moved by exactly one SGD step.
  const std::vector<float>& after = ps.server->core().Snapshot(v1::NETWORK_ONLINE)->values;
  for (size_t i = 0; i < after.size(); ++i) {
    REQUIRE(after[i] == Approx(before[i] - o.learning_rate * g[i]).margin(1e-7));
  }
  // The client's next push is a new one, and applies.
  ps.server->service().SetAfterApplyHookForTesting(nullptr);
  absl::StatusOr<PushAnswer> next = client.Push(g.data(), g.size(), 1, 1, status.incarnation());
  REQUIRE(next.ok());
  CHECK(next->accepted);
  CHECK_FALSE(next->repeated);
  CHECK(ps.Status().version() == 2);
}

TEST_CASE("A push from a previous incarnation is refused in-band and changes nothing",
          "[service][exactly_once]") {
  LoopbackServer ps(Options());
  const std::vector<float> before = ps.server->core().Snapshot(v1::NETWORK_ONLINE)->values;
  agent::PsClient client(ps.ClientOptions("a"));
  const std::vector<float> g(before.size(), 0.01f);
  const uint64_t previous = ps.Status().incarnation() ^ 1;
  absl::StatusOr<PushAnswer> pushed = client.Push(g.data(), g.size(), 0, 1, previous);
  REQUIRE(pushed.ok());
  CHECK_FALSE(pushed->accepted);
  CHECK(pushed->reason == v1::REJECT_REASON_BASE_NOT_IN_LINEAGE);
  // The message names the push's base and what this server's weights descend from.
  CHECK_THAT(pushed->message,
             Catch::Matchers::ContainsSubstring(
                 absl::StrCat("base version 0 of incarnation ", previous)) &&
                 Catch::Matchers::ContainsSubstring(absl::StrCat(
                     "this start (incarnation ", ps.Status().incarnation(), ") from version 0")));
  CHECK(ps.Status().version() == 0);
  CHECK(ps.server->core().Snapshot(v1::NETWORK_ONLINE)->values == before);
  CHECK(Rejections(ps.Status(), v1::REJECT_REASON_BASE_NOT_IN_LINEAGE) == 1);
}

TEST_CASE("A push that got no answer is resent under its number once the server answers",
          "[service][exactly_once]") {
  LoopbackServer ps(Options());
  std::atomic<bool> drop{true};
  ps.server->service().SetAfterApplyHookForTesting([&](const PushAnswer&) {
    return drop ? grpc::Status(grpc::StatusCode::UNAVAILABLE, "reply lost") : grpc::Status::OK;
  });
  agent::PsClientOptions options = ps.ClientOptions("a");
  options.retry_for = absl::Milliseconds(300);
  agent::PsClient client(options);
  const std::vector<float> g(ps.server->core().model().parameter_count, 0.01f);
  absl::StatusOr<PushAnswer> lost = client.Push(g.data(), g.size(), 0, 1);
  REQUIRE(lost.status().code() == absl::StatusCode::kUnavailable);
  CHECK(client.has_pending_push());
  CHECK(ps.Status().version() == 1);  // Applied, though the client never heard.
  drop = false;
  absl::StatusOr<PushAnswer> resent = client.ResendPendingPush();
  REQUIRE(resent.ok());
  CHECK(resent->accepted);
  CHECK(resent->repeated);
  CHECK_FALSE(client.has_pending_push());
  CHECK(ps.Status().version() == 1);
  CHECK(client.ResendPendingPush().status().code() == absl::StatusCode::kFailedPrecondition);
}

TEST_CASE("Push replies carry epsilon and the target-network version", "[service]") {
  ParameterServerOptions o = Options();
  o.target_update_frequency = 4;  // Minibatches.
  o.per_iter_epsilon_reduction = 0.1;
  LoopbackServer ps(o);
  agent::PsClient client(ps.ClientOptions("a"));
  const std::vector<float> g(ps.server->core().model().parameter_count, 0.01f);
  absl::StatusOr<PushAnswer> r = client.Push(g.data(), g.size(), 0, 2);
  CHECK(r->epsilon == Approx(0.9));
  CHECK(r->target_version == 0);
  r = client.Push(g.data(), g.size(), 1, 2);  // 4 minibatches applied: target refreshed.
  CHECK(r->epsilon == Approx(0.8));
  CHECK(r->target_version == 2);
  std::vector<float> target;
  absl::StatusOr<agent::PullResult> pulled = client.Pull(0, 0, v1::NETWORK_TARGET, &target);
  REQUIRE(pulled.ok());
  CHECK(pulled->version == 2);
  CHECK(target == ps.server->core().Snapshot(v1::NETWORK_ONLINE)->values);
  REQUIRE(client.Push(g.data(), g.size(), 2, 1).ok());
  CHECK(client.Pull(2, pulled->incarnation, v1::NETWORK_TARGET, &target)->updated == false);
}

TEST_CASE("Pulls of the averaged network, and of a server that keeps none", "[service][average]") {
  ParameterServerOptions o = Options();
  o.average_horizon = 1000;
  LoopbackServer ps(o);
  agent::PsClient client(ps.ClientOptions("a"));
  const std::vector<float> g = RandomVector(ps.server->core().model().parameter_count, 7);
  REQUIRE(client.Push(g.data(), g.size(), 0, 2).ok());
  REQUIRE(client.Push(g.data(), g.size(), 1, 2).ok());
  REQUIRE(ps.server->core().FoldAverage());
  std::vector<float> average;
  absl::StatusOr<agent::PullResult> pulled = client.Pull(0, 0, v1::NETWORK_AVERAGE, &average);
  REQUIRE(pulled.ok());
  CHECK(pulled->version == 2);
  CHECK(average == ps.server->core().Snapshot(v1::NETWORK_AVERAGE)->values);
  CHECK(average != ps.server->core().Snapshot(v1::NETWORK_ONLINE)->values);
  CHECK(client.Pull(2, pulled->incarnation, v1::NETWORK_AVERAGE, &average)->updated == false);

  ParameterServerOptions off = Options();
  off.average_horizon = 0;
  LoopbackServer plain(off);
  agent::PsClient other(plain.ClientOptions("a"));
  std::vector<float> none = {1.0f};
  absl::StatusOr<agent::PullResult> refused = other.Pull(0, 0, v1::NETWORK_AVERAGE, &none);
  CHECK(refused.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(absl::StrContains(refused.status().message(), "--average_horizon=0"));
  CHECK(none == std::vector<float>{1.0f});
}

TEST_CASE("Ape-X mode gives each agent its own epsilon", "[service]") {
  ParameterServerOptions o = Options();
  o.exploration.mode = ExplorationMode::kApex;
  o.exploration.apex_num_agents = 4;
  LoopbackServer ps(o);
  agent::PsClientOptions first = ps.ClientOptions("a0"), last = ps.ClientOptions("a3");
  last.agent_index = 3;
  CHECK(agent::PsClient(first).Join()->config().epsilon() == Approx(0.4));
  CHECK(agent::PsClient(last).Join()->config().epsilon() == Approx(std::pow(0.4, 8)));
  CHECK(agent::PsClient(last).Join()->config().exploration() == v1::EXPLORATION_APEX);
}

TEST_CASE("A 100M-parameter model pushes and pulls in 1 MiB chunks", "[service][scale]") {
  ParameterServerOptions o = Options("wide");
  o.optimizer.kind = Optimizer::kSgd;
  o.optimizer.momentum = 0;
  o.learning_rate = 1.0;
  LoopbackServer ps(o);
  const size_t n = ps.server->core().model().parameter_count;
  REQUIRE(n > 100000000);
  agent::PsClientOptions co = ps.ClientOptions("big");
  co.push_encoding = TensorEncoding::kBf16;
  co.call_timeout = absl::Seconds(120);
  agent::PsClient client(co);
  std::vector<float> weights;
  REQUIRE(client.Pull(0, 0, v1::NETWORK_ONLINE, &weights).ok());
  REQUIRE(weights.size() == n);
  const float w0 = weights[n - 1];
  std::vector<float> g(n, 0.5f);
  absl::StatusOr<PushAnswer> pushed = client.Push(g.data(), n, 0, 1);
  REQUIRE(pushed.ok());
  CHECK(pushed->accepted);
  g = {};
  REQUIRE(client.Pull(0, 0, v1::NETWORK_ONLINE, &weights).ok());
  CHECK(weights[n - 1] == w0 - 0.5f);
}

}  // namespace
}  // namespace convoy::ps

namespace convoy::ps {
namespace {

TEST_CASE("A pull's chunks refer to the snapshot and outlive a snapshot swap",
          "[service][zero_copy]") {
  const size_t n = 50000;
  std::vector<float> initial(n);
  for (size_t i = 0; i < n; ++i) initial[i] = 0.001f * static_cast<float>(i);
  WeightStore store(initial, 1);
  std::shared_ptr<const WeightSnapshot> snapshot = store.Snapshot();
  const float* memory = snapshot->values.data();

  OutgoingChunk<v1::WeightChunk> chunk;
  chunk.header.set_version(1);
  chunk.values = memory;
  chunk.count = n;
  chunk.keep_alive = snapshot;
  auto sent = std::make_unique<grpc::ByteBuffer>();
  bool own = false;
  REQUIRE(
      grpc::SerializationTraits<OutgoingChunk<v1::WeightChunk>>::Serialize(chunk, sent.get(), &own)
          .ok());
  chunk.keep_alive.reset();
  snapshot.reset();  // Only the serialised chunk holds version 1 now.

  // Newer versions are published, more than the store pools: none may reuse version 1's buffer.
  for (uint64_t version = 2; version <= 30; ++version) {
    for (size_t i = 0; i < n; i += 97) store.mutable_master()[i] += 1.f;
    store.Publish(version);
    REQUIRE(store.Snapshot()->values.data() != memory);
  }
  grpc::ByteBuffer received(*sent);
  IncomingChunk<v1::WeightChunk> incoming;
  REQUIRE(incoming.Parse(&received).ok());
  std::vector<float> out(n);
  size_t decoded = 0;
  REQUIRE(incoming.data().Decode(TensorEncoding::kFp32, out.data(), n, &decoded).ok());
  CHECK(out == initial);  // Still version 1's bytes.

  // Once gRPC and the receiver let go, the store may reuse the buffer again.
  sent.reset();
  incoming = IncomingChunk<v1::WeightChunk>();
  bool reused = false;
  for (uint64_t version = 31; version <= 40 && !reused; ++version) {
    store.Publish(version);
    reused = store.Snapshot()->values.data() == memory;
  }
  CHECK(reused);
}

TEST_CASE("A client that knows only the .proto pulls the same bytes the snapshot holds",
          "[service][zero_copy]") {
  LoopbackServer ps(Options("cookbook"));  // Four chunks in fp32, two in bf16.
  const std::vector<float> exact = ps.server->core().Snapshot(v1::NETWORK_ONLINE)->values;
  for (v1::Encoding encoding : {v1::ENCODING_FP32, v1::ENCODING_BF16}) {
    CAPTURE(v1::Encoding_Name(encoding));
    const TensorEncoding local =
        encoding == v1::ENCODING_BF16 ? TensorEncoding::kBf16 : TensorEncoding::kFp32;
    std::string expected;
    EncodeTensor(exact.data(), exact.size(), local, &expected);
    grpc::ClientContext context;
    v1::PullRequest request;
    request.set_encoding(encoding);
    std::unique_ptr<grpc::ClientReader<v1::WeightChunk>> reader =
        ps.stub->PullWeights(&context, request);  // The generated stub: protobuf's own parsing.
    v1::WeightChunk chunk;
    std::string got;
    int chunks = 0;
    while (reader->Read(&chunk)) {
      CHECK(chunk.offset() * BytesPerElement(local) == got.size());
      CHECK(chunk.total_elements() == exact.size());
      CHECK(chunk.encoding() == encoding);
      got += chunk.data();
      ++chunks;
    }
    REQUIRE(reader->Finish().ok());
    CHECK(chunks ==
          static_cast<int>((exact.size() + ElementsPerChunk(local) - 1) / ElementsPerChunk(local)));
    CHECK(got == expected);
  }
}

// A push stream that holds a receive buffer: its first chunk is sent, the rest when Finish() is
// called.
class StalledPush {
 public:
  // On the loopback server's own connection, or on `stub`'s.
  StalledPush(LoopbackServer& ps, const std::string& agent,
              v1::ParameterServer::Stub* stub = nullptr) {
    const ModelInfo& model = ps.server->core().model();
    chunks_ = Chunked(model, std::vector<float>(model.parameter_count, 0.5f),
                      ElementsPerChunk(TensorEncoding::kFp32));
    chunks_[0].set_agent_id(agent);
    writer_ = (stub != nullptr ? stub : ps.stub.get())->PushGradients(&context_, &response_);
    REQUIRE(writer_->Write(chunks_[0]));
  }
  grpc::Status Finish() {
    SendRest();
    return writer_->Finish();
  }
  // The rest of the push, without waiting for the answer (a small model's push fits in the stream's
  // flow-control window, so this does not wait for the server to read it).
  void SendRest() {
    for (size_t i = 1; i < chunks_.size(); ++i) {
      if (!writer_->Write(chunks_[i])) break;
    }
    writer_->WritesDone();
  }
  grpc::Status Answer() { return writer_->Finish(); }
  const v1::PushResponse& response() const { return response_; }

 private:
  std::vector<v1::GradientChunk> chunks_;
  grpc::ClientContext context_;
  v1::PushResponse response_;
  std::unique_ptr<grpc::ClientWriter<v1::GradientChunk>> writer_;
};

// Polls the server's status until `done` holds, for up to 10 s.
template <typename Done>
bool StatusReaches(const LoopbackServer& ps, Done done) {
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (absl::Now() < give_up) {
    if (done(ps.Status())) return true;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return false;
}

TEST_CASE(
    "A push that finds every buffer in use waits unread, holding no thread, and is applied once "
    "one frees",
    "[service][admission]") {
  ServiceOptions service;
  service.push_buffers = 1;
  service.max_waiting_pushes = 8;
  LoopbackServer ps(Options("cookbook"), LoopbackServer::PlaintextSecurity(), service);
  const size_t n = ps.server->core().model().parameter_count;
  StalledPush stalled(ps, "stalled");
  REQUIRE(
      StatusReaches(ps, [](const v1::StatusResponse& s) { return s.push_buffers_in_use() == 1; }));
  constexpr int kWaiters = 3;
  std::atomic<int> applied{0};
  std::vector<std::thread> pushers;
  for (int t = 0; t < kWaiters; ++t) {
    pushers.emplace_back([&, t] {
      agent::PsClient client(ps.ClientOptions("waiter-" + std::to_string(t)));
      const std::vector<float> g(n, 0.25f);
      absl::StatusOr<PushAnswer> pushed = client.Push(g.data(), n, 0, 1);
      if (pushed.ok() && pushed->accepted) ++applied;
    });
  }
  const bool all_waiting =
      StatusReaches(ps, [](const v1::StatusResponse& s) { return s.pushes_waiting() == kWaiters; });
  CHECK(all_waiting);
  CHECK(ps.Status().updates_applied() == 0);
  REQUIRE(stalled.Finish().ok());
  for (std::thread& t : pushers) t.join();
  CHECK(stalled.response().accepted());
  CHECK(applied.load() == kWaiters);
  const v1::StatusResponse status = ps.Status();
  CHECK(status.updates_applied() == 1 + kWaiters);
  CHECK(status.push_buffers() == 1);
  CHECK(status.push_buffer_bytes() == n * sizeof(float));
  CHECK(status.pushes_waiting() == 0);
  CHECK(Rejections(status, v1::REJECT_REASON_SERVER_BUSY) == 0);
}

TEST_CASE(
    "More pushes than the old server had threads wait at once, holding none, and each is applied "
    "once",
    "[service][admission]") {
  // The server before the callback service ran each push stream on a thread of a pool capped at
  // 256, and refused the next with RESOURCE_EXHAUSTED. Now 300 streams wait for one buffer at once.
  ServiceOptions service;
  service.push_buffers = 1;
  service.max_waiting_pushes = 512;
  LoopbackServer ps(Options("tiny"), LoopbackServer::PlaintextSecurity(), service);
  constexpr int kStreams = 300;
  // Each on a connection of its own, as agents are (the server allows a connection 8 streams).
  std::vector<std::unique_ptr<v1::ParameterServer::Stub>> stubs;
  std::vector<std::unique_ptr<StalledPush>> pushes;
  for (int i = 0; i < kStreams; ++i) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    stubs.push_back(v1::ParameterServer::NewStub(
        grpc::CreateCustomChannel(ps.address, grpc::InsecureChannelCredentials(), args)));
    pushes.push_back(
        std::make_unique<StalledPush>(ps, "agent-" + std::to_string(i), stubs.back().get()));
  }
  const bool all_waiting = StatusReaches(ps, [](const v1::StatusResponse& s) {
    return s.push_buffers_in_use() == 1 && s.pushes_waiting() == kStreams - 1;
  });
  CHECK(all_waiting);
  CHECK(ps.Status().updates_applied() == 0);
  for (auto& push : pushes) push->SendRest();
  int accepted = 0;
  for (auto& push : pushes) {
    const grpc::Status status = push->Answer();
    CHECK(status.ok());
    if (status.ok() && push->response().accepted()) ++accepted;
  }
  CHECK(accepted == kStreams);
  const v1::StatusResponse status = ps.Status();
  CHECK(status.updates_applied() == kStreams);
  CHECK(status.pushes_waiting() == 0);
  CHECK(status.push_buffers_in_use() == 0);
  CHECK(Rejections(status, v1::REJECT_REASON_SERVER_BUSY) == 0);
}

TEST_CASE(
    "A push beyond the waiting bound is refused SERVER_BUSY with a retry delay, which a client "
    "honours",
    "[service][admission]") {
  ServiceOptions service;
  service.push_buffers = 1;
  service.max_waiting_pushes = 0;
  service.busy_retry_after = absl::Milliseconds(100);
  LoopbackServer ps(Options("cookbook"), LoopbackServer::PlaintextSecurity(), service);
  const ModelInfo& model = ps.server->core().model();
  StalledPush stalled(ps, "stalled");
  REQUIRE(
      StatusReaches(ps, [](const v1::StatusResponse& s) { return s.push_buffers_in_use() == 1; }));

  // What the wire says: RESOURCE_EXHAUSTED, gRPC's retry pushback, nothing applied.
  {
    grpc::ClientContext context;
    v1::PushResponse response;
    auto writer = ps.stub->PushGradients(&context, &response);
    auto chunks = Chunked(model, std::vector<float>(model.parameter_count, 0.1f),
                          ElementsPerChunk(TensorEncoding::kFp32));
    for (const v1::GradientChunk& c : chunks) {
      if (!writer->Write(c)) break;
    }
    writer->WritesDone();
    const grpc::Status refused = writer->Finish();
    CHECK(refused.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
    CHECK_THAT(refused.error_message(), Catch::Matchers::ContainsSubstring("busy"));
    const auto& trailers = context.GetServerTrailingMetadata();
    const auto pushback = trailers.find(kRetryPushbackKey);
    REQUIRE(pushback != trailers.end());
    CHECK(std::string(pushback->second.data(), pushback->second.size()) == "100");
  }
  CHECK(Rejections(ps.Status(), v1::REJECT_REASON_SERVER_BUSY) == 1);

  // A client is refused, waits out the delay and tries again until the buffer is free.
  absl::StatusOr<PushAnswer> pushed;
  std::thread client_thread([&] {
    agent::PsClient client(ps.ClientOptions("patient"));
    const std::vector<float> g(model.parameter_count, 0.25f);
    pushed = client.Push(g.data(), g.size(), 0, 1);
  });
  REQUIRE(StatusReaches(ps, [](const v1::StatusResponse& s) {
    return Rejections(s, v1::REJECT_REASON_SERVER_BUSY) >= 3;
  }));
  REQUIRE(stalled.Finish().ok());
  client_thread.join();
  REQUIRE(pushed.ok());
  CHECK(pushed->accepted);
  CHECK_FALSE(pushed->repeated);
  CHECK(ps.Status().updates_applied() == 2);  // The stalled push and the patient one, once each.
}

TEST_CASE("Pullers of one version share one serialization of it; a newer version replaces it",
          "[service][pull_cache]") {
  WeightStore store(std::vector<float>(600000, 0.5f), 3);  // Two chunks in bf16, three in fp32.
  PullCache cache;
  bool built = false;
  std::shared_ptr<const SerializedPull> first =
      cache.Get(store.Snapshot(), v1::NETWORK_ONLINE, TensorEncoding::kBf16, 7, &built);
  CHECK(built);
  std::shared_ptr<const SerializedPull> again =
      cache.Get(store.Snapshot(), v1::NETWORK_ONLINE, TensorEncoding::kBf16, 7, &built);
  CHECK_FALSE(built);
  CHECK(again == first);
  CHECK(first->chunks.size() == 2);
  // Another encoding or network is its own entry.
  cache.Get(store.Snapshot(), v1::NETWORK_ONLINE, TensorEncoding::kFp32, 7, &built);
  CHECK(built);
  store.Publish(4);
  std::shared_ptr<const SerializedPull> newer =
      cache.Get(store.Snapshot(), v1::NETWORK_ONLINE, TensorEncoding::kBf16, 7, &built);
  CHECK(built);
  CHECK(newer->snapshot->version == 4);
  // A late puller of the older version is served it, and does not push the newer one out.
  cache.Get(first->snapshot, v1::NETWORK_ONLINE, TensorEncoding::kBf16, 7, &built);
  CHECK(built);
  CHECK(cache.Get(store.Snapshot(), v1::NETWORK_ONLINE, TensorEncoding::kBf16, 7, &built) == newer);
  CHECK_FALSE(built);
  // The bytes are protobuf's for the same chunk.
  grpc::ByteBuffer copy(newer->chunks[1]);
  std::vector<grpc::Slice> slices;
  REQUIRE(copy.Dump(&slices).ok());
  std::string wire;
  for (const grpc::Slice& slice : slices)
    wire.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  v1::WeightChunk parsed;
  REQUIRE(parsed.ParseFromString(wire));
  CHECK(parsed.version() == 4);
  CHECK(parsed.offset() == ElementsPerChunk(TensorEncoding::kBf16));
  CHECK(parsed.incarnation() == 7);
  v1::WeightChunk expected = parsed;
  std::string data;
  EncodeTensor(store.Snapshot()->values.data() + parsed.offset(),
               parsed.data().size() / BytesPerElement(TensorEncoding::kBf16), TensorEncoding::kBf16,
               &data);
  expected.set_data(data);
  CHECK(expected.SerializeAsString() == wire);
}

}  // namespace
}  // namespace convoy::ps
