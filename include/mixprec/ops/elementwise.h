// Elementwise arithmetic with NumPy broadcasting (shapes aligned at the trailing dims). The
// result dtype is promote(a, b) (mixprec/numerics/dtype.h), which must be f64, f32, bf16 or
// f16 (integer operands join as that dtype; integer-only or FP8-only arithmetic is an
// Error); each element is computed in f32 (f64 for f64) and rounded once. Gradients come
// back in each input's dtype and shape: a broadcast input's gradient terms are formed in f32
// and summed with f32 accumulation (sum_to_shape) before one rounding.
#pragma once

#include "mixprec/tensor/tensor.h"

namespace mixprec {

Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
// x * s, s taken as f32 (f64 for f64 tensors), x floating. Unlike PyTorch, which rounds a
// Python scalar to the tensor's dtype first (bf16 x * 0.37 multiplies by 0.369140625), a
// bf16/f16 x is multiplied by the f32 value of s and the product rounded once.
Tensor scale(const Tensor& x, double s);

// input + value·t1·t2 and input + value·t1/t2 (torch.addcmul / addcdiv), all broadcast, in
// the widest of the three dtypes (floating; integer inputs join it, but addcdiv refuses an
// integer t1 with an integer t2, as PyTorch), computed in f32 (f64 for f64) in PyTorch's
// order ((value·t1)·t2, (value·t1)/t2) and rounded once.
Tensor addcmul(const Tensor& input, const Tensor& t1, const Tensor& t2, double value = 1.0);
Tensor addcdiv(const Tensor& input, const Tensor& t1, const Tensor& t2, double value = 1.0);

// x broadcast to `shape` (NumPy rules, as torch.broadcast_to), as a new contiguous tensor
// (not a view); the gradient is summed back to x's shape.
Tensor broadcast_to(const Tensor& x, const Shape& shape);

// The shape a and b broadcast to; throws naming both shapes when they do not.
Shape broadcast_shapes(const Shape& a, const Shape& b);

}  // namespace mixprec
