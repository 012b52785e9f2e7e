// StalenessPolicy: what to do with a push computed on an older version of the weights.
#ifndef CONVOY_PARAM_SERVER_CORE_STALENESS_POLICY_H_
#define CONVOY_PARAM_SERVER_CORE_STALENESS_POLICY_H_

#include <cstdint>

namespace convoy::ps {

struct StalenessDecision {
  enum class Kind { kApply, kRejectStale, kRejectAhead };
  Kind kind = Kind::kApply;
  uint64_t staleness = 0;  // version - base_version (0 when ahead).
  double lr_scale = 1.0;   // Multiplies the learning rate when applied.
};

class StalenessPolicy {
 public:
  // max_staleness < 0 accepts any staleness. With lr_scaling, a push s versions old is applied with
  // lr / (1 + s).
  StalenessPolicy(int64_t max_staleness, bool lr_scaling)
      : max_staleness_(max_staleness), lr_scaling_(lr_scaling) {}

  // A base_version above the current version cannot come from this server's history: it was computed on
  // weights from before a restart to an older checkpoint.
  StalenessDecision Decide(uint64_t current_version, uint64_t base_version) const;

  int64_t max_staleness() const { return max_staleness_; }

 private:
  int64_t max_staleness_;
  bool lr_scaling_;
};

}  // namespace convoy::ps

#endif  // CONVOY_PARAM_SERVER_CORE_STALENESS_POLICY_H_
