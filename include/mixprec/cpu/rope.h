// Rotate-half rotary position embedding kernel. For row position p and i < Dh/2 the pair
// (x[i], x[i + Dh/2]) turns by the angle p·inv_freq[i], cos and sin times `factor`:
//   out[i] = x[i]·cos - x[i + Dh/2]·sin,   out[i + Dh/2] = x[i + Dh/2]·cos + x[i]·sin.
// cos/sin come from f64 angles (and f64 products with factor), rounded to the math type:
// f32 (f64 for f64).
#pragma once

#include <cstdint>
#include <span>

#include "mixprec/tensor/tensor.h"

namespace mixprec::cpu {

// x contiguous [..., T, Dh] (Dh even), positions offset .. offset + T - 1 along dim -2,
// inv_freq Dh/2 values. inverse: turn by minus the angle with the same factor (the backward:
// the transpose of factor·rotation).
// The result has dtype `out_dtype`: x's dtype, or x f32 and out bf16/f16 (a gradient arriving
// in f32 for a low-precision input is rotated in f32 and rounded once).
Tensor rope_rotate(const Tensor& x, std::span<const double> inv_freq, double factor, int64_t offset,
                   bool inverse, DType out_dtype);

}  // namespace mixprec::cpu
