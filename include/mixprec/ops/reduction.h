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
// torch.linalg.vector_norm(x, ord, dim, keepdim): (Σ|x|^ord)^(1/ord) for finite ord >= 1
// (ord = 2 is norm above) and max |x| for ord = inf. Named vector_norm, not norm, because
// torch.norm(x, 1) means p = 1 while mixprec's norm(x, 1) reduces dim 1. Gradients as
// PyTorch 1.13's norm_backward: sgn(x) for ord = 1 (0 at 0), 0 where the norm is 0, and for
// inf the gradient split evenly among the elements tying for the maximum. The inf norm of
// nothing is an error (the others give 0).
Tensor vector_norm(const Tensor& x, double ord);
Tensor vector_norm(const Tensor& x, double ord, int64_t dim, bool keepdim = false);
// torch.prod: the product (of nothing, 1). Gradient: result/x unless the input holds a zero,
// else the product of the other elements (PyTorch's prod_backward: 0 beside one zero, all 0
// with two).
Tensor prod(const Tensor& x);
Tensor prod(const Tensor& x, int64_t dim, bool keepdim = false);
// torch.cumsum along dim: x's shape, running sums in f32 (f64 for f64), each rounded once.
// Gradient: the reversed cumulative sum of the output gradient.
Tensor cumsum(const Tensor& x, int64_t dim);
// torch.logsumexp over dim: log Σ e^x shifted by the max (an infinite max shifts by 0; an
// all -inf row gives -inf). Gradient g·e^(x - result) (NaN on an all -inf row, as PyTorch).
Tensor logsumexp(const Tensor& x, int64_t dim, bool keepdim = false);

}  // namespace mixprec
