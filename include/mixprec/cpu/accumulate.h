// Gradient sums used by the autograd engine: f32 arithmetic (f64 for f64), one rounding
// into the destination dtype.
#pragma once

#include "mixprec/tensor/tensor.h"

namespace mixprec::cpu {

// dst += src, elementwise; same shape, dst contiguous, src any floating dtype and layout.
void accumulate_into(const Tensor& dst, const Tensor& src);
// a + b as a new contiguous tensor of a's dtype (same shapes).
Tensor add_same_shape(const Tensor& a, const Tensor& b);

}  // namespace mixprec::cpu
