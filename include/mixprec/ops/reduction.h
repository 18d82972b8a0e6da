// Reductions over all elements or one dim, accumulated in f32 (f64 for f64) in a fixed order
// (the same bits whatever the thread count); results in the input's dtype, rounded once.
// A 0-d input reduces over dim 0 / -1 like a [1] tensor. Sum of nothing is 0, mean NaN.
#pragma once

#include <cstdint>
#include <utility>

#include "mixprec/tensor/tensor.h"

namespace mixprec {

Tensor sum(const Tensor& x);  // scalar (shape [])
Tensor sum(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor mean(const Tensor& x);
Tensor mean(const Tensor& x, int64_t dim, bool keepdim = false);
// scalar; gradient to the first maximal element (PyTorch 1.13 splits it evenly among ties).
// NaN counts as the maximum (the first NaN wins). Empty input is an error.
Tensor max(const Tensor& x);
// values (x's dtype) and indices (i64) of the maximum along dim (first on ties); the gradient
// goes to that index.
std::pair<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim = false);
// L2 over all elements. Gradient x / norm, and 0 where norm == 0 (as PyTorch 1.13).
Tensor norm(const Tensor& x);
Tensor norm(const Tensor& x, int64_t dim, bool keepdim = false);

}  // namespace mixprec
