// PushOutcome: the parameter server's answer to a push that passed validation.
#ifndef CONVOY_PARAM_SERVER_PUSH_OUTCOME_H_
#define CONVOY_PARAM_SERVER_PUSH_OUTCOME_H_

#include <cstdint>

#include "convoy/v1/parameter_server.pb.h"

namespace convoy {

struct PushOutcome {
  bool accepted = false;
  v1::RejectReason reason = v1::REJECT_REASON_UNSPECIFIED;
  uint64_t version = 0;
  // The server start whose version `version` is: this one's, or for a repeat answered from a
  // resumed checkpoint's records, the start that first answered.
  uint64_t incarnation = 0;
  uint64_t staleness = 0;
  uint64_t target_version = 0;
  double epsilon = 0;
  // A retry of a push already answered: this is that answer, nothing applied.
  bool repeated = false;
  // The pushes the optimizer step that made `version` combined (0 when none applied).
  uint32_t step_pushes = 0;
};

}  // namespace convoy

#endif  // CONVOY_PARAM_SERVER_PUSH_OUTCOME_H_
