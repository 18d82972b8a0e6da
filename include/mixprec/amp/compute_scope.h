// Everything a forward pass under a precision policy needs switched on, for one scope:
// autocast to the policy's compute dtype (off for f32/f64 compute) with its linear recipe,
// and its matmul precision.
#pragma once

#include "mixprec/amp/autocast.h"
#include "mixprec/amp/policy.h"

namespace mixprec::amp {

class ComputeScope {
 public:
  // `delayed`: the state a delayed recipe casts with (null when the policy has none).
  explicit ComputeScope(const MixedPrecisionPolicy& policy, DelayedScaling* delayed = nullptr)
      : autocast_(policy.compute_dtype, autocast_options(policy, delayed),
                  is_narrow_compute(policy.compute_dtype)),
        matmul_(policy.matmul_precision) {}
  // The policy's linear recipe and its filters as autocast applies them.
  static AutocastOptions autocast_options(const MixedPrecisionPolicy& policy,
                                          DelayedScaling* delayed = nullptr);

 private:
  AutocastGuard autocast_;
  MatmulPrecisionGuard matmul_;
};

}  // namespace mixprec::amp
