// Exactly-once pushes in the parameter server's core: repeats of a (push_session, sequence) are
// answered again and never applied twice, also by a server resumed after a kill; pushes computed on
// weights the server's lineage never had are refused.
#include <google/protobuf/text_format.h>

#include <atomic>
#include <filesystem>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/support/files.h"
#include "param_server/core/parameter_server.h"
#include "tests/catch.h"
#include "tests/support/subprocess.h"

namespace convoy::ps {
namespace {

ParameterServerOptions SgdOptions() {
  ParameterServerOptions o;
  o.model = "tiny";
  o.optimizer.kind = Optimizer::kSgd;
  o.optimizer.momentum = 0;
  o.learning_rate = 0.5;
  return o;
}

PushHeader Header(const ParameterServer& server, uint64_t session, uint64_t sequence) {
  PushHeader h;
  h.agent_id = "a";
  h.base_version = server.version();
  h.base_incarnation = server.incarnation();
  h.push_session = session;
  h.sequence = sequence;
  return h;
}

std::vector<float> Gradient(const ParameterServer& server, float value) {
  return std::vector<float>(server.model().parameter_count, value);
}

std::vector<float> Weights(const ParameterServer& server) {
  return server.Snapshot(v1::NETWORK_ONLINE)->values;
}

TEST_CASE("A repeated push is answered with its first answer and applied once", "[exactly_once]") {
  std::unique_ptr<ParameterServer> server = *ParameterServer::Create(SgdOptions());
  const PushHeader first = Header(*server, 7, 1);
  std::vector<float> g = Gradient(*server, 1.0f);
  const PushAnswer applied = server->Apply(first, g);
  REQUIRE(applied.accepted);
  CHECK_FALSE(applied.repeated);
  const std::vector<float> after_one = Weights(*server);

  std::vector<float> again = Gradient(*server, 1.0f);
  const PushAnswer repeat = server->Apply(first, again);  // The retry carries the same header.
  CHECK(repeat.accepted);
  CHECK(repeat.repeated);
  CHECK(repeat.version == applied.version);
  CHECK(server->version() == 1);
  CHECK(Weights(*server) == after_one);
  const v1::StatusResponse status = server->Status();
  CHECK(status.updates_applied() == 1);
  CHECK(status.repeated_pushes() == 1);

  // The next sequence applies; the older one, arriving late, is superseded and changes nothing.
  std::vector<float> g2 = Gradient(*server, 1.0f);
  REQUIRE(server->Apply(Header(*server, 7, 2), g2).accepted);
  const std::vector<float> after_two = Weights(*server);
  std::vector<float> late = Gradient(*server, 1.0f);
  const PushAnswer superseded = server->Apply(first, late);
  CHECK_FALSE(superseded.accepted);
  CHECK(superseded.repeated);
  CHECK(superseded.reason == v1::REJECT_REASON_SUPERSEDED);
  CHECK(server->version() == 2);
  CHECK(Weights(*server) == after_two);
  CHECK(server->Status().rejections().at("REJECT_REASON_SUPERSEDED") == 1);
}

TEST_CASE("A new push session numbers its pushes afresh", "[exactly_once]") {
  std::unique_ptr<ParameterServer> server = *ParameterServer::Create(SgdOptions());
  for (uint64_t seq = 1; seq <= 3; ++seq) {
    std::vector<float> g = Gradient(*server, 0.1f);
    REQUIRE(server->Apply(Header(*server, 11, seq), g).accepted);
  }
  // A restarted agent process: a new session, its sequence back at 1.
  std::vector<float> g = Gradient(*server, 0.1f);
  const PushAnswer restarted = server->Apply(Header(*server, 12, 1), g);
  CHECK(restarted.accepted);
  CHECK_FALSE(restarted.repeated);
  CHECK(server->version() == 4);
}

TEST_CASE("Join does not forget a push, so a retry across a rejoin still applies once",
          "[exactly_once]") {
  std::unique_ptr<ParameterServer> server = *ParameterServer::Create(SgdOptions());
  const PushHeader header = Header(*server, 5, 1);
  std::vector<float> g = Gradient(*server, 1.0f);
  REQUIRE(server->Apply(header, g).accepted);
  v1::JoinRequest join;
  join.set_agent_id("a");
  join.set_model_fingerprint(server->model().fingerprint);
  REQUIRE(server->Join(join).ok());
  std::vector<float> again = Gradient(*server, 1.0f);
  CHECK(server->Apply(header, again).repeated);
  CHECK(server->version() == 1);
}

TEST_CASE("A push computed on another incarnation's weights is refused and changes nothing",
          "[exactly_once]") {
  std::unique_ptr<ParameterServer> server = *ParameterServer::Create(SgdOptions());
  const std::vector<float> before = Weights(*server);
  PushHeader header = Header(*server, 3, 1);
  header.base_incarnation = server->incarnation() + 1;
  std::vector<float> g = Gradient(*server, 1.0f);
  const PushAnswer refused = server->Apply(header, g);
  CHECK_FALSE(refused.accepted);
  CHECK_FALSE(refused.repeated);
  CHECK(refused.reason == v1::REJECT_REASON_BASE_NOT_IN_LINEAGE);
  CHECK(server->version() == 0);
  CHECK(Weights(*server) == before);
  CHECK(server->Status().rejections().at("REJECT_REASON_BASE_NOT_IN_LINEAGE") == 1);
  // Its retry gets the same answer.
  std::vector<float> again = Gradient(*server, 1.0f);
  const PushAnswer repeat = server->Apply(header, again);
  CHECK(repeat.repeated);
  CHECK(repeat.reason == v1::REJECT_REASON_BASE_NOT_IN_LINEAGE);
  // The current incarnation, and an unknown one (0, an older client), apply.
  std::vector<float> g2 = Gradient(*server, 1.0f);
  CHECK(server->Apply(Header(*server, 3, 2), g2).accepted);
  PushHeader unknown = Header(*server, 3, 3);
  unknown.base_incarnation = 0;
  std::vector<float> g3 = Gradient(*server, 1.0f);
  CHECK(server->Apply(unknown, g3).accepted);
  CHECK(server->version() == 2);
}

TEST_CASE("An older client's pushes carry no sequence and each applies, as before",
          "[exactly_once]") {
  std::unique_ptr<ParameterServer> server = *ParameterServer::Create(SgdOptions());
  for (int i = 0; i < 2; ++i) {
    std::vector<float> g = Gradient(*server, 1.0f);
    CHECK(server->Apply("old", 0, 1, g).accepted);
  }
  CHECK(server->version() == 2);
  CHECK(server->Status().repeated_pushes() == 0);
}

TEST_CASE("Attempts of one push arriving together apply once", "[exactly_once][concurrency]") {
  std::unique_ptr<ParameterServer> server = *ParameterServer::Create(SgdOptions());
  const PushHeader header = Header(*server, 9, 1);
  constexpr int kAttempts = 8;
  std::atomic<int> accepted{0}, repeated{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kAttempts; ++i) {
    threads.emplace_back([&] {
      std::vector<float> g = Gradient(*server, 1.0f);
      const PushAnswer outcome = server->Apply(header, g);
      accepted += outcome.accepted ? 1 : 0;
      repeated += outcome.repeated ? 1 : 0;
    });
  }
  for (std::thread& t : threads) t.join();
  CHECK(accepted == kAttempts);  // Every attempt hears that the push was applied...
  CHECK(repeated == kAttempts - 1);
  CHECK(server->version() == 1);  // ...and it was, once.
  CHECK(server->Status().updates_applied() == 1);
}

TEST_CASE("The apply log names each start, each applied push as its version, and each checkpoint",
          "[exactly_once]") {
  const std::string dir = testing::MakeTempDir("apply_log");
  ParameterServerOptions o = SgdOptions();
  o.checkpoint_dir = dir + "/ckpt";
  o.apply_log = dir + "/apply.log";
  uint64_t first_incarnation = 0;
  {
    absl::StatusOr<std::unique_ptr<ParameterServer>> server = ParameterServer::Create(o);
    REQUIRE(server.ok());
    ParameterServer& ps = **server;
    first_incarnation = ps.incarnation();
    std::vector<float> g = Gradient(ps, 1.0f);
    REQUIRE(ps.Apply(Header(ps, 7, 1), g).accepted);
    g = Gradient(ps, 1.0f);
    REQUIRE(
        ps.Apply(Header(ps, 7, 1), g).repeated);  // A repeat: answered, not applied, not logged.
    REQUIRE(ps.Checkpoint().ok());
    g = Gradient(ps, 1.0f);
    PushHeader stale = Header(ps, 7, 2);
    stale.base_incarnation = ps.incarnation() + 1;  // Refused: not applied, not logged.
    REQUIRE(!ps.Apply(stale, g).accepted);
    g = Gradient(ps, 1.0f);
    REQUIRE(ps.Apply(Header(ps, 7, 3), g).accepted);
  }
  o.resume = true;
  absl::StatusOr<std::unique_ptr<ParameterServer>> resumed = ParameterServer::Create(o);
  REQUIRE(resumed.ok());
  const uint64_t a = first_incarnation, b = (*resumed)->incarnation();
  CHECK(testing::ReadWholeFile(o.apply_log) ==
        absl::StrCat("start incarnation=", a, " version=0\n",  //
                     "apply incarnation=", a,
                     " version=1 agent=a session=7 sequence=1 minibatches=1 "
                     "staleness=0\n",                               //
                     "checkpoint incarnation=", a, " version=1\n",  //
                     "apply incarnation=", a,
                     " version=2 agent=a session=7 sequence=3 minibatches=1 "
                     "staleness=0\n",  //
                     "start incarnation=", b, " version=1 resumed_from=", a, "\n"));
}

// A push of agent `agent`'s session as a client sends it: computed on `base_version` of
// `base_incarnation`, numbered `sequence`.
PushHeader PushOf(const std::string& agent, uint64_t session, uint64_t sequence,
                  uint64_t base_incarnation, uint64_t base_version) {
  PushHeader h;
  h.agent_id = agent;
  h.push_session = session;
  h.sequence = sequence;
  h.base_incarnation = base_incarnation;
  h.base_version = base_version;
  return h;
}

PushAnswer Push(ParameterServer& server, const PushHeader& header, float value = 1.0f) {
  std::vector<float> g = Gradient(server, value);
  return server.Apply(header, g);
}

uint64_t Rejections(const ParameterServer& server, v1::RejectReason reason) {
  const v1::StatusResponse status = server.Status();
  auto it = status.rejections().find(v1::RejectReason_Name(reason));
  return it == status.rejections().end() ? 0 : it->second;
}

ParameterServerOptions CheckpointedOptions(const std::string& name) {
  ParameterServerOptions o = SgdOptions();
  o.checkpoint_dir = testing::MakeTempDir(name) + "/ckpt";
  return o;
}

std::unique_ptr<ParameterServer> Resume(ParameterServerOptions o) {
  o.resume = true;
  absl::StatusOr<std::unique_ptr<ParameterServer>> server = ParameterServer::Create(o);
  REQUIRE(server.ok());
  return *std::move(server);
}

TEST_CASE("A server resumed after a kill decides a resent push by what its checkpoint holds",
          "[exactly_once][restart]") {
  const ParameterServerOptions o = CheckpointedOptions("resent_after_kill");
  uint64_t a = 0;
  std::vector<float> a_at_3;
  {
    std::unique_ptr<ParameterServer> first = *ParameterServer::Create(o);
    a = first->incarnation();
    REQUIRE(Push(*first, PushOf("p", 7, 1, a, 0)).accepted);
    REQUIRE(Push(*first, PushOf("p", 7, 2, a, 1)).accepted);
    REQUIRE(first->Checkpoint().ok());  // Version 2, with p's push 2 in it.
    REQUIRE(Push(*first, PushOf("q", 8, 1, a, 2), 0.5f).version == 3);
    a_at_3 = Weights(*first);
    REQUIRE(Push(*first, PushOf("r", 9, 1, a, 3)).version == 4);
    // Killed: destroyed without a final checkpoint, so versions 3 and 4 are lost.
  }
  std::unique_ptr<ParameterServer> server = Resume(o);
  REQUIRE(server->version() == 2);
  const std::vector<float> restored = Weights(*server);

  // (a) A resend of a push the checkpoint contains: the repeat, with the first answer.
  const PushAnswer repeat = Push(*server, PushOf("p", 7, 2, a, 1));
  CHECK(repeat.repeated);
  CHECK(repeat.accepted);
  CHECK(repeat.version == 2);
  CHECK(repeat.incarnation == a);
  CHECK(server->version() == 2);
  CHECK(Weights(*server) == restored);

  // (b) A resend of a push computed on a checkpointed version but applied only after it: applied,
  // once, to the same weights it was first applied to.
  const PushAnswer applied = Push(*server, PushOf("q", 8, 1, a, 2), 0.5f);
  CHECK(applied.accepted);
  CHECK_FALSE(applied.repeated);
  CHECK(applied.staleness == 0);
  CHECK(applied.version == 3);
  CHECK(applied.incarnation == server->incarnation());
  CHECK(Weights(*server) == a_at_3);
  CHECK(Push(*server, PushOf("q", 8, 1, a, 2), 0.5f).repeated);
  CHECK(server->version() == 3);

  // (c) A push computed on a version the killed server applied after its checkpoint: refused.
  const PushAnswer lost = Push(*server, PushOf("r", 9, 1, a, 3));
  CHECK_FALSE(lost.accepted);
  CHECK_FALSE(lost.repeated);
  CHECK(lost.reason == v1::REJECT_REASON_BASE_NOT_IN_LINEAGE);
  // (d) A push computed on an incarnation the lineage never had: refused.
  const PushAnswer stranger = Push(*server, PushOf("s", 10, 1, a ^ server->incarnation() ^ 1, 1));
  CHECK(stranger.reason == v1::REJECT_REASON_BASE_NOT_IN_LINEAGE);
  CHECK(server->version() == 3);
  CHECK(Weights(*server) == a_at_3);
  CHECK(Rejections(*server, v1::REJECT_REASON_BASE_NOT_IN_LINEAGE) == 2);
  CHECK(server->Status().repeated_pushes() == 2);
  CHECK_THAT(server->lineage().Describe(),
             Catch::Matchers::ContainsSubstring(absl::StrCat("incarnation ", a, " versions 0..2")));
}

TEST_CASE("A shard resumed after a kill keeps its own records and lineage",
          "[exactly_once][restart][shard]") {
  ParameterServerOptions o = CheckpointedOptions("shard_resent_after_kill");
  o.num_shards = 2;
  o.shard_index = 1;
  uint64_t a = 0;
  {
    std::unique_ptr<ParameterServer> first = *ParameterServer::Create(o);
    a = first->incarnation();
    REQUIRE(Push(*first, PushOf("p", 7, 1, a, 0)).accepted);
    REQUIRE(first->Checkpoint().ok());
    REQUIRE(Push(*first, PushOf("q", 8, 1, a, 1)).version == 2);
  }
  std::unique_ptr<ParameterServer> shard = Resume(o);
  REQUIRE(shard->version() == 1);
  CHECK(Push(*shard, PushOf("p", 7, 1, a, 0)).repeated);
  CHECK(Push(*shard, PushOf("q", 8, 1, a, 1)).version == 2);
  CHECK(Push(*shard, PushOf("r", 9, 1, a, 2)).reason == v1::REJECT_REASON_BASE_NOT_IN_LINEAGE);
}

TEST_CASE("A push on a version of the lineage is refused for staleness only by the staleness rule",
          "[exactly_once][restart]") {
  ParameterServerOptions o = CheckpointedOptions("lineage_staleness");
  o.max_staleness = 1;
  uint64_t a = 0;
  {
    std::unique_ptr<ParameterServer> first = *ParameterServer::Create(o);
    a = first->incarnation();
    for (uint64_t v = 0; v < 3; ++v) REQUIRE(Push(*first, PushOf("p", 7, v + 1, a, v)).accepted);
    REQUIRE(first->Checkpoint().ok());
  }
  std::unique_ptr<ParameterServer> server = Resume(o);
  REQUIRE(server->version() == 3);
  const PushAnswer stale = Push(*server, PushOf("q", 8, 1, a, 1));
  CHECK_FALSE(stale.accepted);
  CHECK(stale.reason == v1::REJECT_REASON_STALE);
  CHECK(stale.staleness == 2);
  const PushAnswer fresh_enough = Push(*server, PushOf("r", 9, 1, a, 2));
  CHECK(fresh_enough.accepted);
  CHECK(fresh_enough.staleness == 1);
  CHECK(server->version() == 4);
}

TEST_CASE("The lineage survives two restarts: the third start still knows the first one's versions",
          "[exactly_once][restart]") {
  const ParameterServerOptions o = CheckpointedOptions("lineage_two_restarts");
  uint64_t a = 0, b = 0;
  {
    std::unique_ptr<ParameterServer> first = *ParameterServer::Create(o);
    a = first->incarnation();
    REQUIRE(Push(*first, PushOf("p", 7, 1, a, 0)).accepted);
    REQUIRE(first->Checkpoint().ok());  // Version 1.
  }
  {
    std::unique_ptr<ParameterServer> second = Resume(o);
    b = second->incarnation();
    REQUIRE(Push(*second, PushOf("q", 8, 1, b, 1)).version == 2);
    REQUIRE(second->Checkpoint().ok());                            // Version 2.
    REQUIRE(Push(*second, PushOf("q", 8, 2, b, 2)).version == 3);  // Lost with the kill.
  }
  std::unique_ptr<ParameterServer> third = Resume(o);
  REQUIRE(third->version() == 2);
  // The first start's push, resent: its record came through the second start's checkpoint.
  const PushAnswer repeat = Push(*third, PushOf("p", 7, 1, a, 0));
  CHECK(repeat.repeated);
  CHECK(repeat.accepted);
  CHECK(repeat.version == 1);
  CHECK(repeat.incarnation == a);
  // Computed on the first start's version 1 and on the second's 1 and 2: of this lineage.
  const PushAnswer on_first = Push(*third, PushOf("r", 9, 1, a, 1));
  CHECK(on_first.accepted);
  CHECK(on_first.staleness == 1);
  CHECK(Push(*third, PushOf("s", 10, 1, b, 1)).accepted);
  CHECK(Push(*third, PushOf("t", 11, 1, b, 2)).accepted);
  // The second start's version 3 was lost; the first start never made version 2.
  CHECK(Push(*third, PushOf("q", 8, 2, b, 2)).accepted);  // A resend on version 2: new here.
  CHECK(Push(*third, PushOf("u", 12, 1, b, 3)).reason == v1::REJECT_REASON_BASE_NOT_IN_LINEAGE);
  CHECK(Push(*third, PushOf("v", 13, 1, a, 2)).reason == v1::REJECT_REASON_BASE_NOT_IN_LINEAGE);
  CHECK(third->version() == 6);
  const std::string described = third->lineage().Describe();
  CHECK_THAT(described,
             Catch::Matchers::ContainsSubstring(absl::StrCat(
                 "incarnation ", a, " versions 0..1, incarnation ", b, " versions 1..2")));
}

TEST_CASE(
    "A start killed before its first checkpoint is still known: it served the version it resumed "
    "at",
    "[exactly_once][restart]") {
  const ParameterServerOptions o = CheckpointedOptions("lineage_unsaved_start");
  uint64_t b = 0;
  {
    std::unique_ptr<ParameterServer> first = *ParameterServer::Create(o);
    REQUIRE(Push(*first, PushOf("p", 7, 1, first->incarnation(), 0)).accepted);
    REQUIRE(first->Checkpoint().ok());  // Version 1.
  }
  {
    std::unique_ptr<ParameterServer> second = Resume(o);  // Killed before any checkpoint.
    b = second->incarnation();
    REQUIRE(second->version() == 1);
    REQUIRE(Push(*second, PushOf("q", 8, 1, b, 1)).version == 2);  // Lost with the kill.
  }
  std::unique_ptr<ParameterServer> third = Resume(o);
  REQUIRE(third->version() == 1);
  // The second start's agents computed on its version 1, the checkpoint's weights: of this lineage.
  const PushAnswer on_resumed = Push(*third, PushOf("r", 9, 1, b, 1));
  CHECK(on_resumed.accepted);
  CHECK(on_resumed.staleness == 0);
  // Its version 2 was lost with it.
  CHECK(Push(*third, PushOf("s", 10, 1, b, 2)).reason == v1::REJECT_REASON_BASE_NOT_IN_LINEAGE);
  CHECK_THAT(third->lineage().Describe(),
             Catch::Matchers::ContainsSubstring(absl::StrCat("incarnation ", b, " versions 1..1")));
}

TEST_CASE("A checkpoint written before records and lineages were kept still resumes, knowing none",
          "[exactly_once][restart]") {
  const ParameterServerOptions o = CheckpointedOptions("old_manifest");
  uint64_t a = 0;
  std::string path;
  {
    std::unique_ptr<ParameterServer> first = *ParameterServer::Create(o);
    a = first->incarnation();
    REQUIRE(Push(*first, PushOf("p", 7, 1, a, 0)).accepted);
    absl::StatusOr<std::string> written = first->Checkpoint();
    REQUIRE(written.ok());
    path = *written;
  }
  // The manifest as an older server wrote it: the same, without the new fields.
  absl::StatusOr<v1::CheckpointManifest> manifest = Checkpointer::VerifyManifest(path);
  REQUIRE(manifest.ok());
  REQUIRE(manifest->push_records_size() == 1);
  REQUIRE(manifest->lineage_size() == 1);
  manifest->clear_push_records();
  manifest->clear_lineage();
  std::string text;
  REQUIRE(google::protobuf::TextFormat::PrintToString(*manifest, &text));
  REQUIRE(std::filesystem::remove(path + "/MANIFEST"));
  REQUIRE(WriteNewFileDurably(path + "/MANIFEST", text, 0644).ok());

  std::unique_ptr<ParameterServer> server = Resume(o);
  CHECK(server->version() == 1);
  // Nothing of the first start is known: its resend is refused, not taken for a repeat.
  CHECK(Push(*server, PushOf("p", 7, 1, a, 0)).reason == v1::REJECT_REASON_BASE_NOT_IN_LINEAGE);
  CHECK(Push(*server, PushOf("p", 7, 2, server->incarnation(), 1)).accepted);
  CHECK(server->version() == 2);
  // Its own checkpoints start a lineage again.
  absl::StatusOr<std::string> next = server->Checkpoint();
  REQUIRE(next.ok());
  absl::StatusOr<v1::CheckpointManifest> written = Checkpointer::VerifyManifest(*next);
  REQUIRE(written.ok());
  REQUIRE(written->lineage_size() == 1);
  CHECK(written->lineage(0).incarnation() == server->incarnation());
  CHECK(written->lineage(0).after_version() == 1);
  CHECK(written->lineage(0).upto_version() == 2);
}

TEST_CASE("An apply log that cannot be opened stops the server at start, naming the path",
          "[exactly_once]") {
  ParameterServerOptions o = SgdOptions();
  o.apply_log = "/nonexistent-dir/apply.log";
  absl::StatusOr<std::unique_ptr<ParameterServer>> server = ParameterServer::Create(o);
  REQUIRE(!server.ok());
  CHECK_THAT(std::string(server.status().message()),
             Catch::Matchers::ContainsSubstring("/nonexistent-dir/apply.log"));
}

}  // namespace
}  // namespace convoy::ps
