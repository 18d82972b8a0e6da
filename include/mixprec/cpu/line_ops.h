// prod, logsumexp, p-norms and cumsum along one dim (kernel_types.h: LineOp), and the
// elementwise loss terms (PairOp), on the cpu backend: one pass over the operands widened
// to f32 (f64 for f64), the formulas of backend/line_math.h and pair_math.h. Single-threaded
// and scalar: these are fp32-autocast ops off a training step's hot path.
#pragma once

#include <array>

#include "mixprec/backend/kernel_types.h"
#include "mixprec/tensor/tensor.h"

namespace mixprec::cpu {

using backend::LineFunction;
using backend::PairFunction;
using backend::ReduceGeometry;

Tensor line_forward(const LineFunction& f, const Tensor& x, ReduceGeometry g);
Tensor line_backward(const LineFunction& f, const Tensor& x, const Tensor& result,
                     const Tensor& grad, ReduceGeometry g, DType dtype);
Tensor pair_forward(const PairFunction& f, const Tensor& x, const Tensor& t,
                    const Tensor& pos_weight);
std::array<Tensor, 2> pair_backward(const PairFunction& f, const Tensor& x, const Tensor& t,
                                    const Tensor& pos_weight, const Tensor& g, bool want_x,
                                    bool want_t);

}  // namespace mixprec::cpu
