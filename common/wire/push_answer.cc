#include "common/wire/push_answer.h"

namespace convoy {

void ToResponse(const PushAnswer& answer, v1::PushResponse* response) {
  response->set_accepted(answer.accepted);
  response->set_reason(answer.reason);
  response->set_version(answer.version);
  response->set_staleness(answer.staleness);
  response->set_epsilon(answer.epsilon);
  response->set_target_version(answer.target_version);
  response->set_incarnation(answer.incarnation);
  response->set_repeated(answer.repeated);
  response->set_step_pushes(answer.step_pushes);
  response->set_message(answer.message);
}

PushAnswer FromResponse(const v1::PushResponse& response) {
  PushAnswer answer;
  answer.accepted = response.accepted();
  answer.reason = response.reason();
  answer.version = response.version();
  answer.staleness = response.staleness();
  answer.epsilon = response.epsilon();
  answer.target_version = response.target_version();
  answer.incarnation = response.incarnation();
  answer.repeated = response.repeated();
  answer.step_pushes = response.step_pushes();
  answer.message = response.message();
  return answer;
}

void ToRecord(const PushAnswer& answer, v1::PushRecord* record) {
  ToResponse(answer, record->mutable_answer());
  record->mutable_answer()->clear_message();  // Written again when the answer is given again.
}

PushAnswer FromRecord(const v1::PushRecord& record) {
  if (record.has_answer()) return FromResponse(record.answer());
    // An older checkpoint's record: the fields it kept, deprecated since `answer` holds them.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  PushAnswer answer;
  answer.accepted = record.accepted();
  answer.reason = record.reason();
  answer.version = record.version();
  answer.staleness = record.staleness();
  answer.epsilon = record.epsilon();
  answer.incarnation = record.incarnation();
#pragma GCC diagnostic pop
  return answer;
}

}  // namespace convoy
