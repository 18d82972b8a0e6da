// Reduction kernels over one dim of a contiguous tensor viewed as [outer, n, inner] (n is the
// reduced dim; a reduction over all elements is outer = inner = 1). Sums accumulate in f32
// (f64 for f64) over fixed chunks whose partials are combined in a fixed order, so results
// never depend on the thread count.
#pragma once

#include <cstdint>
#include <utility>
#include "mixprec/backend/kernel_types.h"

#include "mixprec/tensor/tensor.h"

namespace mixprec::cpu {

using backend::ReduceGeometry;

// The geometry of reducing `shape` over `dim` (already normalized; a 0-d shape reduces as [1]).
using backend::reduce_geometry;

// The dtype reductions accumulate in: f64 for f64, else f32.
using backend::reduce_acc_dtype;

using backend::ReduceOp;  // sum; sum / n; sqrt(sum of squares)

// x [outer, n, inner] (contiguous, f64/f32/bf16/f16) -> [outer, inner] in reduce_acc_dtype,
// unrounded (callers round once into x's dtype).
Tensor reduce_dim(const Tensor& x, ReduceGeometry g, ReduceOp op);
// Backward of sum (scale 1) and mean (divide by n): grad [outer, inner] (any floating dtype)
// broadcast over n -> [outer, n, inner] in `dtype`, each value rounded once.
Tensor reduce_expand_backward(const Tensor& grad, ReduceGeometry g, bool mean, DType dtype);
// Backward of the L2 norm: x [outer, n, inner] * (grad / norm) [outer, inner], in x's dtype;
// zero where norm == 0 (the subgradient PyTorch picks). norm is reduce_dim's unrounded result.
Tensor norm_backward(const Tensor& grad, const Tensor& x, const Tensor& norm, ReduceGeometry g);

// Max over n: values [outer, inner] in x's dtype and indices i64 [outer, inner]; the first
// maximal element wins ties, and NaN counts as the maximum (the first NaN wins). n >= 1.
std::pair<Tensor, Tensor> max_dim(const Tensor& x, ReduceGeometry g);
// grad [outer, inner] (any floating dtype) placed at indices, zeros elsewhere:
// [outer, n, inner] in `dtype`.
Tensor max_backward(const Tensor& grad, const Tensor& indices, ReduceGeometry g, DType dtype);

}  // namespace mixprec::cpu
