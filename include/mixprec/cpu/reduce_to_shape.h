// Sums a broadcast result back to the shape it was broadcast from (the backward of
// broadcasting): `shape` must broadcast to grad.shape(). f32 accumulation (f64 for f64),
// result in grad's dtype; the summation order is fixed, whatever the thread count.
#pragma once

#include "mixprec/tensor/tensor.h"

namespace mixprec::cpu {

Tensor reduce_to_shape(const Tensor& grad, const Shape& shape);

}  // namespace mixprec::cpu
