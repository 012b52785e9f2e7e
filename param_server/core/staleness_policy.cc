#include "param_server/core/staleness_policy.h"

namespace convoy::ps {

StalenessDecision StalenessPolicy::Decide(uint64_t current_version, uint64_t base_version) const {
  StalenessDecision decision;
  if (base_version > current_version) {
    decision.kind = StalenessDecision::Kind::kRejectAhead;
    return decision;
  }
  decision.staleness = current_version - base_version;
  if (max_staleness_ >= 0 && decision.staleness > static_cast<uint64_t>(max_staleness_)) {
    decision.kind = StalenessDecision::Kind::kRejectStale;
    return decision;
  }
  if (lr_scaling_) decision.lr_scale = 1.0 / (1.0 + static_cast<double>(decision.staleness));
  return decision;
}

}  // namespace convoy::ps
