// Elementwise arithmetic with NumPy broadcasting (shapes aligned at the trailing dims). The
// result dtype is promote(a, b) (mixprec/numerics/dtype.h); each element is computed in f32
// (f64 for f64) and rounded once. Gradients of broadcast inputs are summed back to their shape.
#pragma once

#include "mixprec/tensor/tensor.h"

namespace mixprec {

Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
// x * s, s taken as f32 (f64 for f64 tensors).
Tensor scale(const Tensor& x, double s);

// The shape a and b broadcast to; throws naming both shapes when they do not.
Shape broadcast_shapes(const Shape& a, const Shape& b);

}  // namespace mixprec
