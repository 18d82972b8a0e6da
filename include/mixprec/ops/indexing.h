// Selection and the scatter/gather family MoE token dispatch is built from. Index tensors
// are i32 or i64; an index out of range is an error naming the value and the bound.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "mixprec/tensor/tensor.h"

namespace mixprec {

// The k largest (or smallest) along dim, sorted; ties keep the lower index first.
// Returns values (x's dtype) and indices (i64).
std::pair<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim = -1, bool largest = true);
// out[i][j] = x[i][index[i][j]] (dim 1; any dim likewise); index has x's rank.
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
// out = x; out[index[i][j]][j] += src[i][j] (dim 0; any dim likewise).
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
// out = x; out[index[i]] += alpha * source[i] along dim; index is 1-d.
Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source,
                 double alpha = 1.0);
// Joins tensors of one dtype along dim (other dims equal).
Tensor concat(const std::vector<Tensor>& tensors, int64_t dim);

}  // namespace mixprec
