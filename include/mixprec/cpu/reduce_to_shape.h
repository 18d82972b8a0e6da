// Sums a broadcast result back to the shape it was broadcast from (the backward of
// broadcasting): `shape` must broadcast to grad.shape(). f32 accumulation (f64 for f64),
// result in grad's dtype or `out_dtype` (e.g. f32 for a bias gradient, rounded once or not
// at all); the summation order is fixed, whatever the thread count.
#pragma once

#include <optional>

#include "mixprec/tensor/tensor.h"

namespace mixprec::cpu {

Tensor reduce_to_shape(const Tensor& grad, const Shape& shape,
                       std::optional<DType> out_dtype = std::nullopt);

}  // namespace mixprec::cpu
