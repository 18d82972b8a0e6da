// A policy's casts, as jmp's Policy.cast_to_param / cast_to_compute / cast_to_output: each
// floating tensor (f64, f32, bf16, f16, fp8) becomes the policy's dtype; integer and bool
// tensors pass through unchanged, as jmp leaves non-floating leaves alone. Casts are
// Tensor::to, so they record autograd history: a gradient flows back to the input's dtype.
// A tensor already in the target dtype is returned as is (no copy).
//
//   TensorMap w = amp::cast_to_compute(policy, optim::parameter_values(model.parameters()));
#pragma once

#include <vector>

#include "mixprec/amp/policy.h"
#include "mixprec/tensor/tensor_map.h"

namespace mixprec::amp {

Tensor cast_to_param(const MixedPrecisionPolicy& policy, const Tensor& x);
Tensor cast_to_compute(const MixedPrecisionPolicy& policy, const Tensor& x);
Tensor cast_to_output(const MixedPrecisionPolicy& policy, const Tensor& x);

std::vector<Tensor> cast_to_param(const MixedPrecisionPolicy& policy,
                                  const std::vector<Tensor>& xs);
std::vector<Tensor> cast_to_compute(const MixedPrecisionPolicy& policy,
                                    const std::vector<Tensor>& xs);
std::vector<Tensor> cast_to_output(const MixedPrecisionPolicy& policy,
                                   const std::vector<Tensor>& xs);

TensorMap cast_to_param(const MixedPrecisionPolicy& policy, const TensorMap& xs);
TensorMap cast_to_compute(const MixedPrecisionPolicy& policy, const TensorMap& xs);
TensorMap cast_to_output(const MixedPrecisionPolicy& policy, const TensorMap& xs);

// The one rule behind them: x in `dtype` when x is floating, else x itself.
Tensor cast_floating(const Tensor& x, DType dtype);

}  // namespace mixprec::amp
