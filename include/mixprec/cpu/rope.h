// Rotate-half rotary position embedding kernel. For row position p and i < Dh/2 the pair
// (x[i], x[i + Dh/2]) turns by the angle p·theta^(-2i/Dh):
//   out[i] = x[i]·cos - x[i + Dh/2]·sin,   out[i + Dh/2] = x[i + Dh/2]·cos + x[i]·sin.
// cos/sin come from f64 angles, rounded to the math type: f32 (f64 for f64).
#pragma once

#include <cstdint>

#include "mixprec/tensor/tensor.h"

namespace mixprec::cpu {

// x contiguous [..., T, Dh] (Dh even), positions offset .. offset + T - 1 along dim -2.
// inverse: turn by minus the angle (the backward: the rotation's transpose is its inverse).
// The result has dtype `out_dtype`: x's dtype, or x f32 and out bf16/f16 (a gradient arriving
// in f32 for a low-precision input is rotated in f32 and rounded once).
Tensor rope_rotate(const Tensor& x, double theta, int64_t offset, bool inverse, DType out_dtype);

}  // namespace mixprec::cpu
