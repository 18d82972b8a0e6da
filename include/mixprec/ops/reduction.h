// Reductions over all elements or one dim, accumulated in f32 (f64 for f64) in a fixed order;
// results in the input's dtype.
#pragma once

#include <cstdint>
#include <utility>

#include "mixprec/tensor/tensor.h"

namespace mixprec {

Tensor sum(const Tensor& x);  // scalar (shape [])
Tensor sum(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor mean(const Tensor& x);
Tensor mean(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor max(const Tensor& x);  // scalar; gradient to the first maximal element
// values (x's dtype) and indices (i64) of the maximum along dim (first on ties)
std::pair<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor norm(const Tensor& x);  // L2 over all elements
Tensor norm(const Tensor& x, int64_t dim, bool keepdim = false);

}  // namespace mixprec
