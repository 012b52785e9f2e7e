#include "param_server/core/push_deduplicator.h"

#include "tests/catch.h"

namespace convoy::ps {
namespace {

using Verdict = PushDeduplicator::Verdict;

PushAnswer Accepted(uint64_t version) {
  PushAnswer outcome;
  outcome.accepted = true;
  outcome.version = version;
  return outcome;
}

TEST_CASE("A push not seen before is new, and its retry is answered with the recorded answer",
          "[push_deduplicator]") {
  PushDeduplicator dedup;
  REQUIRE(dedup.Check("a", 7, 1).verdict == Verdict::kNew);
  dedup.Record("a", 7, 1, Accepted(3));
  const PushDeduplicator::Seen again = dedup.Check("a", 7, 1);
  CHECK(again.verdict == Verdict::kRepeat);
  CHECK(again.answer.accepted);
  CHECK(again.answer.version == 3);
}

TEST_CASE("A push older than the one last answered is superseded", "[push_deduplicator]") {
  PushDeduplicator dedup;
  dedup.Record("a", 7, 5, Accepted(1));
  CHECK(dedup.Check("a", 7, 4).verdict == Verdict::kSuperseded);
  CHECK(dedup.Check("a", 7, 6).verdict == Verdict::kNew);
}

TEST_CASE("A new push session starts the agent's sequence space afresh", "[push_deduplicator]") {
  PushDeduplicator dedup;
  dedup.Record("a", 7, 5, Accepted(1));
  CHECK(dedup.Check("a", 8, 1).verdict == Verdict::kNew);
}

TEST_CASE("Agents' sequences are independent of each other", "[push_deduplicator]") {
  PushDeduplicator dedup;
  dedup.Record("a", 7, 5, Accepted(1));
  CHECK(dedup.Check("b", 7, 5).verdict == Verdict::kNew);
  CHECK(dedup.Check("b", 7, 1).verdict == Verdict::kNew);
}

TEST_CASE("Sequence 0 is a client without exactly-once: always new, never remembered",
          "[push_deduplicator]") {
  PushDeduplicator dedup;
  dedup.Record("a", 0, 0, Accepted(1));
  CHECK(dedup.Check("a", 0, 0).verdict == Verdict::kNew);
  CHECK(dedup.Check("a", 0, 0).verdict == Verdict::kNew);
}

TEST_CASE("Records saved into a checkpoint and restored answer a repeat as the repeat",
          "[push_deduplicator]") {
  PushDeduplicator before;
  PushAnswer applied = Accepted(3);
  applied.incarnation = 11;
  applied.staleness = 1;
  applied.epsilon = 0.25;
  applied.target_version = 2;
  applied.step_pushes = 3;
  before.Record("a", 7, 5, applied);
  PushAnswer stale;
  stale.reason = v1::REJECT_REASON_STALE;
  stale.version = 4;
  stale.incarnation = 11;
  before.Record("b", 8, 2, stale);
  REQUIRE(before.Check("c", 9, 1).verdict == Verdict::kNew);  // Checked, never answered.
  v1::CheckpointManifest manifest;
  before.SaveTo(manifest);
  CHECK(manifest.push_records_size() == 2);

  PushDeduplicator after;
  after.Restore(manifest);
  const PushDeduplicator::Seen again = after.Check("a", 7, 5);
  REQUIRE(again.verdict == Verdict::kRepeat);
  CHECK(again.answer.accepted);
  CHECK(again.answer.version == 3);
  CHECK(again.answer.incarnation == 11);
  CHECK(again.answer.staleness == 1);
  CHECK(again.answer.epsilon == 0.25);
  CHECK(again.answer.target_version == 2);  // The whole answer, as first given.
  CHECK(again.answer.step_pushes == 3);
  const PushDeduplicator::Seen refused = after.Check("b", 8, 2);
  REQUIRE(refused.verdict == Verdict::kRepeat);
  CHECK_FALSE(refused.answer.accepted);
  CHECK(refused.answer.reason == v1::REJECT_REASON_STALE);
  CHECK(after.Check("a", 7, 4).verdict == Verdict::kSuperseded);
  CHECK(after.Check("a", 7, 6).verdict == Verdict::kNew);
  CHECK(after.Check("c", 9, 1).verdict == Verdict::kNew);
}

TEST_CASE("A record of an older checkpoint, before records held the whole answer, restores",
          "[push_deduplicator]") {
  v1::CheckpointManifest manifest;
  v1::PushRecord* record = manifest.add_push_records();
  record->set_agent_id("a");
  record->set_push_session(7);
  record->set_sequence(5);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  record->set_accepted(true);
  record->set_version(3);
  record->set_staleness(1);
  record->set_epsilon(0.25);
  record->set_incarnation(11);
#pragma GCC diagnostic pop
  PushDeduplicator dedup;
  dedup.Restore(manifest);
  const PushDeduplicator::Seen again = dedup.Check("a", 7, 5);
  REQUIRE(again.verdict == Verdict::kRepeat);
  CHECK(again.answer.accepted);
  CHECK(again.answer.version == 3);
  CHECK(again.answer.staleness == 1);
  CHECK(again.answer.epsilon == 0.25);
  CHECK(again.answer.incarnation == 11);
}

TEST_CASE("A checkpoint without records (an older one) restores none", "[push_deduplicator]") {
  PushDeduplicator dedup;
  dedup.Record("a", 7, 5, Accepted(1));
  dedup.Restore(v1::CheckpointManifest());
  CHECK(dedup.Check("a", 7, 5).verdict == Verdict::kNew);
}

}  // namespace
}  // namespace convoy::ps
