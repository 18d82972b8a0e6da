// The geometry of a reduction over every element or one dim (private to src/ops).
#pragma once

#include <algorithm>
#include <string>

#include "mixprec/backend/kernel_types.h"
#include "mixprec/tensor/tensor.h"

namespace mixprec::detail {

struct Plan {
  backend::ReduceGeometry g;
  Shape out_shape;
};

// Reducing every element: [1, numel, 1] -> a 0-d result.
inline Plan plan_all(const Tensor& x) {
  return {{1, x.numel(), 1}, {}};
}

// Reducing one dim; a 0-d tensor reduces like [1] (dim 0 or -1) to a 0-d result.
inline Plan plan_dim(const Tensor& x, int64_t dim, bool keepdim, const char* op) {
  const int d = normalize_dim(dim, std::max(x.ndim(), 1), op);
  Plan p{backend::reduce_geometry(x.shape(), d), x.shape()};
  if (x.ndim() > 0) {
    if (keepdim)
      p.out_shape[static_cast<size_t>(d)] = 1;
    else
      p.out_shape.erase(p.out_shape.begin() + d);
  }
  return p;
}

}  // namespace mixprec::detail
