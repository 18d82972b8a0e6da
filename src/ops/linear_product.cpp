#include "linear_product.h"

#include <string>

#include "linear_parts.h"
#include "mixprec/backend/backend.h"

namespace mixprec::detail {

LinearProduct LinearProduct::prepare(const char* op, const Tensor& x, const Tensor& weight,
                                     const Tensor& bias) {
  check_float_pair(op, x, weight);
  MIXPREC_CHECK(weight.ndim() == 2 && x.ndim() >= 1 && x.size(-1) == weight.size(1), op,
                "x " + shape_to_string(x.shape()) + " and weight " +
                    shape_to_string(weight.shape()) +
                    " do not match: expected x [..., In] and weight [Out, In]");
  LinearProduct p;
  p.in = weight.size(1);
  p.out = weight.size(0);
  if (bias.defined())
    MIXPREC_CHECK(bias.dtype() == x.dtype() && bias.ndim() == 1 && bias.size(0) == p.out, op,
                  "bias must be [" + std::to_string(p.out) + "] of " + dtype_name(x.dtype()) +
                      ", got " + shape_to_string(bias.shape()) + " of " + dtype_name(bias.dtype()));
  p.rows = p.in == 0 ? shape_numel(x.shape()) : x.numel() / p.in;
  p.precision = f32_precision(x, weight);
  p.x2 = precision_operand(x.detach().contiguous().view({p.rows, p.in}), p.precision);
  p.w = precision_operand(weight.detach().contiguous(), p.precision);
  p.b = bias.defined() ? bias.detach().contiguous() : Tensor();  // not rounded
  p.x_shape = x.shape();
  p.x_dtype = x.dtype();
  return p;
}

Tensor LinearProduct::make_output() const {
  Shape shape = x_shape;
  shape.back() = out;
  return Tensor::empty(shape, x_dtype);
}

void LinearProduct::forward(const Tensor& y) const {
  backend::current().gemm(rows, out, in, 1.0f, {x2.dtype(), x2.raw_data(), in},
                          {w.dtype(), w.raw_data(), in, true}, 0.0f,
                          {x_dtype, y.raw_data(), out, 0, b.defined() ? b.raw_data() : nullptr}, 1);
}

LinearProduct::Grads LinearProduct::start_backward(const Tensor& dy, bool want_x, bool want_w,
                                                   bool want_b) const {
  const Tensor g = as_operand(dy, x_dtype).view({rows, out});
  Grads r;
  r.operand = precision_operand(g, precision);
  if (want_x) r.dx = Tensor::empty(x_shape, x_dtype);
  if (want_w) r.dw = Tensor::empty({out, in}, acc_dtype(w.dtype()));
  if (want_b) r.db = backend::current().reduce_to_shape(g, {out}, acc_dtype(g.dtype()));
  return r;
}

void LinearProduct::grad_x(const Grads& g) const {
  backend::current().gemm(rows, in, out, 1.0f, {g.operand.dtype(), g.operand.raw_data(), out},
                          {w.dtype(), w.raw_data(), in}, 0.0f, {x_dtype, g.dx.raw_data(), in}, 1);
}

void LinearProduct::grad_w(const Grads& g) const {
  backend::current().gemm(out, in, rows, 1.0f, {g.operand.dtype(), g.operand.raw_data(), out, true},
                          {x2.dtype(), x2.raw_data(), in}, 0.0f,
                          {g.dw.dtype(), g.dw.raw_data(), in}, 1);
}

}  // namespace mixprec::detail
