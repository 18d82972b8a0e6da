// Kernels of the gather/scatter family, topk and concat. Every tensor is contiguous; index
// tensors are i32 or i64. Scatters never use atomics: each output element is owned by one
// task and receives its contributions in index order, so results never depend on the thread
// count. Sums accumulate in f32 (f64 for f64) and round once.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "mixprec/cpu/reduction.h"
#include "mixprec/tensor/tensor.h"

namespace mixprec::cpu {

// Calls fn.template operator()<I>() with I the index's element type (int32_t or int64_t).
template <class Fn>
decltype(auto) dispatch_index(const Tensor& index, const char* op, Fn&& fn) {
  if (index.dtype() == DType::i64) return fn.template operator()<int64_t>();
  MIXPREC_CHECK(index.dtype() == DType::i32, op,
                std::string("index must be i32 or i64, got ") + dtype_name(index.dtype()));
  return fn.template operator()<int32_t>();
}

// Throws naming the first value of `index` outside [0, bound), its position and the bound.
void check_index_range(const Tensor& index, int64_t bound, const char* op);

// Where the positions of an index tensor land in another tensor of the same rank. The index
// shape splits at `dim` into [outer, m, inner] (the dims before / after flattened); index
// position (o, j, p) corresponds to offset outer_off[o] + j' * dim_stride + inner_off[p] of
// the other tensor, where j' is j or the index value there.
struct IndexPlacement {
  std::vector<int64_t> outer_off;  // [outer]
  std::vector<int64_t> inner_off;  // [inner]
  int64_t dim_stride = 1;
  bool inner_contiguous = false;  // inner_off[p] == p (same trailing dims as the index)
};
// shape must be at least index_shape in every dim but `dim` (the callers check).
IndexPlacement index_placement(const Shape& index_shape, const Shape& shape, int dim);

// The index of gather / scatter_add as the kernels read it. An index broadcast over every dim
// after `dim` (stride 0 there, e.g. a row id per token expanded over the hidden dim) is kept
// as one value per row, [outer, m], and never materialized: whole rows move at once.
struct IndexView {
  Tensor data;        // contiguous i32/i64: the index, or its [outer, m] rows when `rows`
  Shape shape;        // the index's logical shape
  bool rows = false;  // data holds one value per (o, j), shared by every inner position
};
IndexView index_view(const Tensor& index, int dim);

// dst[dp(o, j, p)] = src[sp(o, index[o, j, p], p)] for every index position; any dtype
// (a byte copy), src and dst of one dtype. Whole rows with one index value are memcpy'd.
void gather_into(const Tensor& src, const IndexPlacement& sp, const IndexView& index, int dim,
                 const Tensor& dst, const IndexPlacement& dp);
// acc[ap(o, index[o, j, p], p)] += src[sp(o, j, p)] in index order; acc and src both f32 or
// both f64.
void scatter_add_into(const Tensor& acc, const IndexPlacement& ap, const IndexView& index, int dim,
                      const Tensor& src, const IndexPlacement& sp);

// x [outer, n, inner] with out[o, index[i], :] += alpha * source[o, i, :] (source
// [outer, m, inner], index 1-d [m], checked); each output row is widened once, gets its
// source rows added in index order, and is rounded once.
Tensor index_add(const Tensor& x, ReduceGeometry g, const Tensor& index, const Tensor& source,
                 double alpha);
// out[o, i, :] = alpha * grad[o, index[i], :] for grad [outer, n, inner] (any floating dtype)
// -> [outer, m, inner] in `dtype`, rounded once (a row copy when alpha is 1 and the dtypes
// match).
Tensor index_select_scaled(const Tensor& grad, ReduceGeometry g, const Tensor& index, double alpha,
                           DType dtype);

// The k largest (smallest) of x [outer, n, inner] along n, sorted, ties to the lower index,
// NaN above everything (as PyTorch): values [outer, k, inner] in x's dtype, indices i64.
std::pair<Tensor, Tensor> topk(const Tensor& x, ReduceGeometry g, int64_t k, bool largest);
// grad [outer, k, inner] (any floating dtype) placed at indices, zeros elsewhere:
// [outer, n, inner] in `dtype`.
Tensor topk_backward(const Tensor& grad, const Tensor& indices, ReduceGeometry g, int64_t k,
                     DType dtype);

// The backend's gather and scatter_add (backend.h) on these kernels: the index is checked,
// read in place when it is broadcast over the trailing dims, and a scatter of whole rows into
// a tensor without leading dims (the MoE combine) runs as index_add, whose one pass gives the
// same bits.
Tensor gather(const Tensor& x, int dim, const Tensor& index, const Shape& out_shape,
              const char* op);
Tensor scatter_add(const Tensor& x, int dim, const Tensor& index, const Tensor& src,
                   const char* op);
// Joins contiguous parts of one dtype along dim into a new tensor of out_shape.
Tensor concat(const std::vector<Tensor>& parts, int dim, const Shape& out_shape);

}  // namespace mixprec::cpu
