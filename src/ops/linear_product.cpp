#include "linear_product.h"

#include <string>

#include "linear_parts.h"
#include "mixprec/cpu/gemm.h"

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

Shape LinearProduct::y_shape() const {
  Shape s = x_shape;
  s.back() = out;
  return s;
}

void LinearProduct::forward(const Tensor& y) const {
  cpu::gemm(rows, out, in, 1.0f, {x2.dtype(), x2.raw_data(), in},
            {w.dtype(), w.raw_data(), in, true}, 0.0f,
            {x_dtype, y.raw_data(), out, 0, b.defined() ? b.raw_data() : nullptr});
}

Tensor LinearProduct::grad_rows(const Tensor& dy) const {
  return as_operand(dy, x_dtype).view({rows, out});
}

Tensor LinearProduct::grad_operand(const Tensor& g) const {
  return precision_operand(g, precision);
}

void LinearProduct::grad_x(const Tensor& gp, const Tensor& dx) const {
  cpu::gemm(rows, in, out, 1.0f, {gp.dtype(), gp.raw_data(), out}, {w.dtype(), w.raw_data(), in},
            0.0f, {x_dtype, dx.raw_data(), in});
}

void LinearProduct::grad_w(const Tensor& gp, const Tensor& dw) const {
  cpu::gemm(out, in, rows, 1.0f, {gp.dtype(), gp.raw_data(), out, true},
            {x2.dtype(), x2.raw_data(), in}, 0.0f, {dw.dtype(), dw.raw_data(), in});
}

DType LinearProduct::grad_w_dtype() const {
  return acc_dtype(w.dtype());
}

}  // namespace mixprec::detail
