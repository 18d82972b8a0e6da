// RMSNorm / LayerNorm kernels over the last dim. Statistics are f32 (f64 for f64) and kept
// per row for the backward pass; weight and bias gradients are f32 sums over rows in a
// fixed chunk order, so they never depend on the thread count.
#pragma once

#include "mixprec/backend/kernel_types.h"
#include "mixprec/tensor/tensor.h"

namespace mixprec::cpu {

// Per-row statistics saved by the forward pass: [rows] f32 (f64 for f64).
using backend::NormStats;

// x [..., D] contiguous; weight, bias [D] contiguous of x's dtype, or undefined.
// center = true: LayerNorm, (x - mean) * rstd * w + b; false: RMSNorm, x * rstd * w (+ b).
// Returns y (x's shape and dtype) and fills `stats`.
Tensor norm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,
                    bool center, NormStats& stats);

using backend::NormGrads;
// dy: x's shape, any floating dtype and layout. Computes the gradients asked for.
NormGrads norm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight,
                        const NormStats& stats, bool center, bool need_dx, bool need_dweight,
                        bool need_dbias);

}  // namespace mixprec::cpu
