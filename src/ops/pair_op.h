// f(x, t) per element for the functions of two tensors (backend kernel_types.h: PairOp):
// the loss terms and pow (private to src/ops).
#pragma once

#include "mixprec/backend/kernel_types.h"
#include "mixprec/tensor/tensor.h"

namespace mixprec::detail {

// f of x and t broadcast together (same_shape: they must already agree, an error naming `op`
// otherwise), pos_weight broadcast to them (or undefined), in f32 (f64 when an input is f64),
// unrounded; gradients reach x and t in their own shapes and dtypes.
Tensor pair_op(const char* op, const backend::PairFunction& f, const Tensor& x, const Tensor& t,
               const Tensor& pos_weight, bool same_shape);

}  // namespace mixprec::detail
