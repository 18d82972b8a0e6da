// The pointwise math kernels (exp, log, ..., softplus, pow; kernel_types.h: Pointwise) on
// contiguous or strided operands of any floating dtype: f32 math (f64 for f64 tensors) with
// libm's functions, one rounding on store. These ops run in f32 under autocast and are not on
// a training step's hot path, so they use the map_flat block runner rather than vector code.
#pragma once

#include "mixprec/backend/kernel_types.h"
#include "mixprec/tensor/tensor.h"

namespace mixprec::cpu {

using backend::Pointwise;

// f(x) in x's dtype.
Tensor pointwise_forward(const Pointwise& f, const Tensor& x);
// g·f'(x) in x's dtype; g of x's shape, any floating dtype.
Tensor pointwise_backward(const Pointwise& f, const Tensor& x, const Tensor& g);

}  // namespace mixprec::cpu
