// Selection and the scatter/gather family MoE token dispatch is built from. Index tensors
// are i32 or i64; an index out of range (negative included) is an error naming the value and
// the bound. Sums accumulate in f32 (f64 for f64), in index order, and round once: results
// never depend on the thread count. Index inputs get no gradient.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "mixprec/tensor/tensor.h"

namespace mixprec {

// The k largest (or smallest) along dim, sorted; ties keep the lower index first; NaN ranks
// above every number (first for largest, last for smallest). 0 <= k <= size(dim).
// Returns values (x's dtype) and indices (i64); the gradient goes to the selected elements.
std::pair<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim = -1, bool largest = true);
// out[i][j] = x[i][index[i][j]] (dim 1; any dim likewise); index has x's rank and is no
// larger than x outside dim; out has index's shape. x may be any dtype. Gradient: grad
// scatter-added into zeros.
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
// out = x; out[index[i][j]][j] += src[i][j] (dim 0; any dim likewise). index has x's rank,
// is no larger than src anywhere nor than x outside dim. Gradients: grad_x = grad,
// grad_src = grad gathered at index (zero where src extends beyond index).
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
// out = x; out[index[i]] += alpha * source[i] along dim; index is 1-d and source is x's shape
// with size(dim) = index.numel(). alpha is taken as f32 (f64 for f64). Gradients:
// grad_x = grad, grad_source = alpha * grad selected at index.
Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source,
                 double alpha = 1.0);
// Joins tensors of one dtype (any dtype) along dim (other dims equal); each gradient is its
// slice of the output gradient.
Tensor concat(const std::vector<Tensor>& tensors, int64_t dim);

// torch.stack: tensors of one shape joined along a new dim (-(rank+1) <= dim <= rank), in
// the widest of their dtypes (PyTorch promotes: f32 and bf16 give f32); each gradient comes
// back in its own input's dtype.
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
// torch.where: x where cond (boolean or u8) is true, else y, all three broadcast; the result
// has promote(x, y)'s dtype. Gradients: x gets g where cond, y where not, in their dtypes.
Tensor where(const Tensor& cond, const Tensor& x, const Tensor& y);
// A number beside a floating tensor does not widen it (torch.where(c, bf16, 0.0) stays
// bf16); beside an integer tensor it gives f32.
Tensor where(const Tensor& cond, const Tensor& x, double y);
// torch.Tensor.index_put (out of place): x with x[indices] = values, or += with accumulate.
// indices index x's leading dims: i64/i32 tensors broadcast together (negative values count
// from the end), or one boolean mask of those dims' shape. values (x's dtype) broadcast to
// the indexed shape. Without accumulate, of duplicate indices the last one written wins
// (PyTorch leaves it undefined; its CPU kernel does the same). Gradients as PyTorch's:
// x gets g, zeroed at written positions unless accumulate; values get g at their indices
// (duplicates included), summed to values' shape.
Tensor index_put(const Tensor& x, const std::vector<Tensor>& indices, const Tensor& values,
                 bool accumulate = false);

}  // namespace mixprec
