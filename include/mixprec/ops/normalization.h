// Normalisation over the last dim, statistics in f32 (f64 for f64) whatever the storage.
// Backward reuses the per-row mean/rstd saved by the forward pass; x's gradient has x's
// dtype, weight and bias gradients are f32 sums over rows (fixed order, whatever the thread
// count) rounded once into the weight's dtype.
#pragma once

#include "mixprec/tensor/tensor.h"

namespace mixprec {

// x / sqrt(mean(x², -1) + eps) * weight; x [..., D], weight [D] (may be undefined).
Tensor rmsnorm(const Tensor& x, const Tensor& weight, double eps = 1e-5);
// (x - mean) / sqrt(var + eps) * weight + bias (biased var); weight, bias [D] or undefined.
Tensor layernorm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps = 1e-5);

}  // namespace mixprec
