// A pull that follows its push (PullRequest.after_sequence): the server's registry of waits, and
// the whole exchange over loopback with a real server and real clients.
#include <atomic>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "param_server/service/followed_pushes.h"
#include "tests/catch.h"
#include "tests/param_server/service/loopback_server.h"

namespace convoy::ps {
namespace {

using testing::LoopbackServer;

ParameterServerOptions SgdOptions() {
  ParameterServerOptions o;
  o.model = "tiny";
  o.optimizer.kind = Optimizer::kSgd;
  o.optimizer.momentum = 0;
  return o;
}

std::vector<float> RandomVector(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 0.01f);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

// A pull through the generated stub (protobuf's own parsing): its first chunk's version, and its
// status.
struct RawPull {
  grpc::Status status;
  uint64_t version = 0;
  bool not_newer = false;
};
RawPull PullFollowing(LoopbackServer& ps, const std::string& agent_id, uint64_t session,
                      uint64_t sequence, grpc::ClientContext* context = nullptr) {
  grpc::ClientContext own;
  if (context == nullptr) context = &own;
  v1::PullRequest request;
  request.set_agent_id(agent_id);
  request.set_after_push_session(session);
  request.set_after_sequence(sequence);
  std::unique_ptr<grpc::ClientReader<v1::WeightChunk>> reader =
      ps.stub->PullWeights(context, request);
  RawPull pulled;
  v1::WeightChunk chunk;
  bool first = true;
  while (reader->Read(&chunk)) {
    if (!first) continue;
    first = false;
    pulled.version = chunk.version();
    pulled.not_newer = chunk.not_newer();
  }
  pulled.status = reader->Finish();
  return pulled;
}

TEST_CASE("A followed pull's wait runs once its push, or a later one of its session, is decided",
          "[followed]") {
  FollowedPushes followed;
  int ran = 0;
  const uint64_t id = followed.Await({"a", 1, 2}, [&ran] { ++ran; });
  REQUIRE(id != 0);
  followed.Decided({"a", 1, 1});  // An earlier push.
  followed.Decided({"b", 1, 5});  // Another agent's.
  followed.Decided({"a", 2, 9});  // Another session's.
  CHECK(ran == 0);
  CHECK(followed.waiting() == 1);
  followed.Decided({"a", 1, 3});  // A later push of its session covers it.
  CHECK(ran == 1);
  CHECK(followed.waiting() == 0);
  // Session 1 is no longer the agent's newest (session 2 was decided after it), but push 3 of
  // session 1 was: a pull after push 3 goes at once, one after push 4 waits.
  CHECK(followed.Await({"a", 1, 3}, [&ran] { ++ran; }) == 0);
  const uint64_t later = followed.Await({"a", 1, 4}, [&ran] { ++ran; });
  REQUIRE(later != 0);
  CHECK(followed.Cancel(later));
  CHECK_FALSE(followed.Cancel(later));
  followed.Decided({"a", 1, 4});
  CHECK(ran == 1);  // Withdrawn: never runs.
  // A wait for a push that never comes runs when it expires.
  REQUIRE(followed.Await({"c", 7, 1}, [&ran] { ++ran; }) != 0);
  CHECK(followed.Expire(absl::Now() - absl::Seconds(60)) == 0);
  CHECK(followed.Expire(absl::Now() + absl::Seconds(1)) == 1);
  CHECK(ran == 2);
  CHECK(followed.waiting() == 0);
}

TEST_CASE("A pull that follows its push is held until the push is applied, and brings its step",
          "[service][followed]") {
  const ParameterServerOptions o = SgdOptions();
  LoopbackServer ps(o);
  const std::vector<float> before = ps.server->core().Snapshot(v1::NETWORK_ONLINE)->values;
  agent::PsClient client(ps.ClientOptions("a"));
  const std::vector<float> g = RandomVector(before.size(), 5);

  // The pull goes first, naming the push this client will make next.
  std::atomic<bool> answered{false};
  RawPull held;
  std::thread puller([&] {
    held = PullFollowing(ps, "a", client.push_session(), client.next_sequence());
    answered = true;
  });
  absl::SleepFor(absl::Milliseconds(300));
  CHECK_FALSE(answered.load());  // Held: its push has not come.
  absl::StatusOr<PushAnswer> pushed =
      client.Push(g.data(), g.size(), 0, 1, ps.Status().incarnation());
  puller.join();
  REQUIRE(pushed.ok());
  CHECK(pushed->accepted);
  CHECK(pushed->version == 1);
  REQUIRE(held.status.ok());
  CHECK(held.version == 1);  // The step the push made.

  // PushThenPull does both in one exchange; the weights are the two SGD steps.
  std::vector<float> weights;
  agent::PsClient::PushPull done = client.PushThenPull(
      g.data(), g.size(), 1, 1, ps.Status().incarnation(), 0, 0, v1::NETWORK_ONLINE, &weights);
  REQUIRE(done.pushed.ok());
  CHECK(done.pushed->accepted);
  CHECK(done.pushed->version == 2);
  REQUIRE(done.pulled.has_value());
  REQUIRE(done.pulled->ok());
  CHECK((*done.pulled)->version == 2);
  CHECK((*done.pulled)->updated);
  REQUIRE(weights.size() == before.size());
  for (size_t i = 0; i < weights.size(); ++i) {
    REQUIRE(weights[i] == Approx(before[i] - 2 * o.learning_rate * g[i]).margin(1e-6));
  }
  const v1::StatusResponse status = ps.Status();
  CHECK(status.updates_applied() == 2);
  CHECK(status.pulls_served() == 2);
}

TEST_CASE("A followed pull whose push is refused, or never comes, is still answered",
          "[service][followed]") {
  ServiceOptions service;
  service.stream_idle_timeout = absl::Milliseconds(300);
  LoopbackServer ps(SgdOptions(), LoopbackServer::PlaintextSecurity(), service);
  agent::PsClient client(ps.ClientOptions("a"));
  const std::vector<float> g = RandomVector(ps.server->core().model().parameter_count, 6);

  // Refused by policy (ahead of the server): decided all the same, so the pull goes at once.
  std::vector<float> weights;
  agent::PsClient::PushPull ahead =
      client.PushThenPull(g.data(), g.size(), 100, 1, 0, 0, 0, v1::NETWORK_ONLINE, &weights);
  REQUIRE(ahead.pushed.ok());
  CHECK_FALSE(ahead.pushed->accepted);
  CHECK(ahead.pushed->reason == v1::REJECT_REASON_AHEAD);
  REQUIRE(ahead.pulled.has_value());
  REQUIRE(ahead.pulled->ok());
  CHECK((*ahead.pulled)->version == 0);

  // A push that never comes: answered with the newest weights once the idle timeout has passed.
  const absl::Time start = absl::Now();
  const RawPull orphan = PullFollowing(ps, "ghost", 42, 1);
  const absl::Duration waited = absl::Now() - start;
  REQUIRE(orphan.status.ok());
  CHECK(orphan.version == 0);
  CHECK(waited >= absl::Milliseconds(250));
  CHECK(waited < absl::Seconds(30));

  // Without the agent it follows, the server cannot tell its push: refused, naming the field.
  v1::PullRequest nameless;
  nameless.set_after_push_session(1);
  nameless.set_after_sequence(1);
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReader<v1::WeightChunk>> reader =
      ps.stub->PullWeights(&context, nameless);
  v1::WeightChunk chunk;
  CHECK_FALSE(reader->Read(&chunk));
  const grpc::Status refused = reader->Finish();
  CHECK(refused.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(absl::StrContains(refused.error_message(), "agent_id"));
  CHECK(ps.Status().version() == 0);  // Nothing changed.
}

TEST_CASE("A followed pull cancelled while it waits ends at once, and the next exchange works",
          "[service][followed]") {
  LoopbackServer ps(SgdOptions());  // The default idle timeout: a minute.
  agent::PsClient client(ps.ClientOptions("a"));
  grpc::ClientContext context;
  std::thread canceller([&] {
    absl::SleepFor(absl::Milliseconds(200));
    context.TryCancel();
  });
  const absl::Time start = absl::Now();
  const RawPull cancelled = PullFollowing(ps, "a", client.push_session(), 5, &context);
  canceller.join();
  CHECK(cancelled.status.error_code() == grpc::StatusCode::CANCELLED);
  CHECK(absl::Now() - start < absl::Seconds(30));  // Not the minute of the idle timeout.
  const std::vector<float> g = RandomVector(ps.server->core().model().parameter_count, 7);
  std::vector<float> weights;
  agent::PsClient::PushPull done =
      client.PushThenPull(g.data(), g.size(), 0, 1, 0, 0, 0, v1::NETWORK_ONLINE, &weights);
  REQUIRE(done.pushed.ok());
  CHECK(done.pushed->accepted);
  REQUIRE(done.pulled.has_value());
  REQUIRE(done.pulled->ok());
  CHECK((*done.pulled)->version == 1);
}

}  // namespace
}  // namespace convoy::ps
