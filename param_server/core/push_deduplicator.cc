#include "param_server/core/push_deduplicator.h"

namespace convoy::ps {

PushDeduplicator::Seen PushDeduplicator::Check(const std::string& agent_id, uint64_t push_session,
                                               uint64_t sequence) {
  if (sequence == 0) return {};
  LastPush& last = last_push_[agent_id];
  if (last.push_session != push_session) last = LastPush{push_session, 0, {}};
  if (sequence > last.sequence) return {};
  if (sequence < last.sequence) return {Verdict::kSuperseded, {}};
  return {Verdict::kRepeat, last.answer};
}

void PushDeduplicator::Record(const std::string& agent_id, uint64_t push_session, uint64_t sequence,
                              const PushAnswer& answer) {
  if (sequence == 0) return;
  last_push_[agent_id] = LastPush{push_session, sequence, answer};
}

void PushDeduplicator::SaveTo(v1::CheckpointManifest& manifest) const {
  for (const auto& [agent_id, last] : last_push_) {
    if (last.sequence == 0) continue;  // A Check of a new session that was never answered.
    v1::PushRecord* record = manifest.add_push_records();
    record->set_agent_id(agent_id);
    record->set_push_session(last.push_session);
    record->set_sequence(last.sequence);
    ToRecord(last.answer, record);
  }
}

void PushDeduplicator::Restore(const v1::CheckpointManifest& manifest) {
  last_push_.clear();
  for (const v1::PushRecord& record : manifest.push_records()) {
    if (record.agent_id().empty() || record.sequence() == 0) continue;
    last_push_[record.agent_id()] =
        LastPush{record.push_session(), record.sequence(), FromRecord(record)};
  }
}

}  // namespace convoy::ps
