// Normalisation over the last dim, statistics in f32 (f64 for f64) whatever the storage.
#pragma once

#include "mixprec/tensor/tensor.h"

namespace mixprec {

// x / sqrt(mean(x², -1) + eps) * weight; x [..., D], weight [D] (may be undefined).
Tensor rmsnorm(const Tensor& x, const Tensor& weight, double eps = 1e-5);
// (x - mean) / sqrt(var + eps) * weight + bias (biased var); weight, bias [D] or undefined.
Tensor layernorm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps = 1e-5);

}  // namespace mixprec
