// Everything a forward pass under a precision policy needs switched on, for one scope:
// autocast to the policy's compute dtype (off for f32/f64 compute) with its linear recipe,
// and its matmul precision.
#pragma once

#include <cstdint>
#include <optional>

#include "mixprec/amp/autocast.h"
#include "mixprec/amp/policy.h"

namespace mixprec::amp {

class ComputeScope {
 public:
  // `delayed`: the state a delayed recipe casts with (null when the policy has none);
  // `rounding_seed`: the key of the recipe's stochastic casts (AutocastOptions).
  explicit ComputeScope(const MixedPrecisionPolicy& policy, DelayedScaling* delayed = nullptr,
                        std::optional<uint64_t> rounding_seed = {})
      : autocast_(policy.compute_dtype, autocast_options(policy, delayed, rounding_seed),
                  is_narrow_compute(policy.compute_dtype)),
        matmul_(policy.matmul_precision) {}
  // The policy's linear recipe and its filters as autocast applies them.
  static AutocastOptions autocast_options(const MixedPrecisionPolicy& policy,
                                          DelayedScaling* delayed = nullptr,
                                          std::optional<uint64_t> rounding_seed = {});

 private:
  AutocastGuard autocast_;
  MatmulPrecisionGuard matmul_;
};

}  // namespace mixprec::amp
