#include "param_server/push_deduplicator.h"

namespace convoy {

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
                              const PushOutcome& answer) {
  if (sequence == 0) return;
  last_push_[agent_id] = LastPush{push_session, sequence, answer};
}

}  // namespace convoy
