#include "linear_product.h"

#include <string>

#include "linear_parts.h"
#include "mixprec/amp/autocast.h"
#include "mixprec/amp/delayed_scaling.h"
#include "mixprec/autograd/grad_mode.h"
#include "mixprec/backend/backend.h"

namespace mixprec::detail {

// C [rows of a, rows of b] in f32; the caller rounds it once into its result's dtype.
Tensor LinearProduct::fp8_product(const amp::ProductRecipe& r, const Tensor& a, const char* a_role,
                                  const Tensor& b, const char* b_role, const Tensor& bias,
                                  amp::Fp8Product product) const {
  const backend::Backend& be = backend::current();
  const auto cast = [&](const Tensor& t, const backend::QuantSpec& spec, const char* role) {
    return delayed ? amp::delayed_quantize(t, spec, *delayed, module_path + "." + role, record_amax)
                   : be.quantize(t, spec);
  };
  Tensor c;
  if (amp::fp8_collecting()) {  // quantize makes operands contiguous anyway: once, for both
    const Tensor ac = a.contiguous(), bc = b.contiguous();
    const backend::Quantized qa = cast(ac, r.a, a_role), qb = cast(bc, r.b, b_role);
    amp::record_fp8_operand(fp8_site, product, 0, ac, qa);
    amp::record_fp8_operand(fp8_site, product, 1, bc, qb);
    c = be.scaled_gemm(qa, qb, DType::f32);
  } else {
    c = be.scaled_gemm(cast(a, r.a, a_role), cast(b, r.b, b_role), DType::f32);
  }
  if (bias.defined()) c = be.binary(backend::BinaryOp::add, c, bias, c.shape(), DType::f32);
  return c;
}

LinearProduct LinearProduct::prepare(const char* op, const Tensor& x, const Tensor& weight,
                                     const Tensor& bias, std::optional<amp::RecipeSite> site) {
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
  if (site && p.rows > 0) p.recipe = amp::linear_recipe_here(p.out, p.in, *site);
  if (p.recipe && p.recipe->delayed) {
    p.delayed = amp::delayed_scaling_here();
    MIXPREC_CHECK(p.delayed != nullptr, op,
                  std::string("recipe ") + p.recipe->name +
                      " casts with amax histories, and the autocast guard holds none (its "
                      "options' delayed_scaling: the trainer gives one)");
    p.module_path = std::string(amp::module_path());
    p.record_amax = GradMode::is_enabled();
  }
  if (p.recipe) p.fp8_site = amp::fp8_site_here();
  return p;
}

Tensor LinearProduct::make_output() const {
  Shape shape = x_shape;
  shape.back() = out;
  return Tensor::empty(shape, x_dtype);
}

void LinearProduct::forward(const Tensor& y) const {
  if (recipe && recipe->output.fp8) {
    y.view({rows, out})
        .copy_from(fp8_product(recipe->output, x2, "input", w, "weight", b, amp::Fp8Product::fwd));
    return;
  }
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
  if (recipe && recipe->grad_input.fp8) {  // dX = dY·W: A = dY [rows, out], B = Wᵀ [in, out]
    g.dx.view({rows, in})
        .copy_from(fp8_product(recipe->grad_input, g.operand, "grad_output", w.transpose(0, 1),
                               "weight", {}, amp::Fp8Product::dgrad));
    return;
  }
  backend::current().gemm(rows, in, out, 1.0f, {g.operand.dtype(), g.operand.raw_data(), out},
                          {w.dtype(), w.raw_data(), in}, 0.0f, {x_dtype, g.dx.raw_data(), in}, 1);
}

void LinearProduct::grad_w(const Grads& g) const {
  if (recipe && recipe->grad_weight.fp8) {  // dW = dYᵀ·X: A = dYᵀ [out, rows], B = Xᵀ [in, rows]
    Tensor(g.dw).copy_from(fp8_product(recipe->grad_weight, g.operand.transpose(0, 1),
                                       "grad_output", x2.transpose(0, 1), "input", {},
                                       amp::Fp8Product::wgrad));
    return;
  }
  backend::current().gemm(out, in, rows, 1.0f, {g.operand.dtype(), g.operand.raw_data(), out, true},
                          {x2.dtype(), x2.raw_data(), in}, 0.0f,
                          {g.dw.dtype(), g.dw.raw_data(), in}, 1);
}

}  // namespace mixprec::detail
