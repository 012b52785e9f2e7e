// PushAnswer: a parameter server's answer to a push, the one type both ends hold. The server's
// apply path makes it, the service sends it as a PushResponse, the exactly-once records keep it in
// checkpoints (PushRecord), and the agent's client reads it back. The conversions to and from the
// wire and checkpoint messages are here, and only here.
#ifndef CONVOY_COMMON_WIRE_PUSH_ANSWER_H_
#define CONVOY_COMMON_WIRE_PUSH_ANSWER_H_

#include <cstdint>
#include <string>

#include "convoy/v1/checkpoint.pb.h"
#include "convoy/v1/parameter_server.pb.h"

namespace convoy {

struct PushAnswer {
  bool accepted = false;
  v1::RejectReason reason = v1::REJECT_REASON_UNSPECIFIED;
  // The version after this push (the current one when it was not applied).
  uint64_t version = 0;
  // The server start whose version `version` is: this one's, or for a repeat answered from a
  // resumed checkpoint's records, the start that first answered.
  uint64_t incarnation = 0;
  uint64_t staleness = 0;       // The version at apply time minus the push's base version.
  uint64_t target_version = 0;  // The target network's; pull it when this changed.
  double epsilon = 0;           // The pusher's exploration rate now.
  // A retry of a push already answered: this is that answer, nothing applied.
  bool repeated = false;
  // The pushes the optimizer step that made `version` combined (0 when none applied).
  uint32_t step_pushes = 0;
  // Why it was not applied, for people (the service writes it; the apply path leaves it empty).
  std::string message;
};

// The wire's form, both ways.
void ToResponse(const PushAnswer& answer, v1::PushResponse* response);
PushAnswer FromResponse(const v1::PushResponse& response);

// The exactly-once record's form, both ways. A record from a checkpoint written before records
// carried the whole answer gives what it kept (no target version, repeat flag or step size).
void ToRecord(const PushAnswer& answer, v1::PushRecord* record);
PushAnswer FromRecord(const v1::PushRecord& record);

}  // namespace convoy

#endif  // CONVOY_COMMON_WIRE_PUSH_ANSWER_H_
