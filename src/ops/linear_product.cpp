#include "linear_product.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "linear_parts.h"
#include "mixprec/amp/autocast.h"
#include "mixprec/amp/delayed_scaling.h"
#include "mixprec/amp/fp8_input_cache.h"
#include "mixprec/amp/fp8_weights.h"
#include "mixprec/autograd/grad_mode.h"
#include "mixprec/backend/backend.h"
#include "mixprec/backend/modeled_gemm.h"
#include "mixprec/core/hash.h"
#include "mixprec/core/parallel.h"
#include "mixprec/numerics/convert.h"

namespace mixprec::detail {

uint64_t rounding_stream(std::string_view module, amp::Fp8Product product, std::string_view role) {
  return splitmix64(fnv1a(module) ^ splitmix64(fnv1a(role) + static_cast<uint64_t>(product)));
}

// C [rows of a, rows of b] in f32; the caller rounds it once into its result's dtype.
Tensor LinearProduct::fp8_product(const amp::ProductRecipe& r, const Tensor& a, const char* a_role,
                                  const Tensor& b, const char* b_role, const Tensor& bias,
                                  amp::Fp8Product product, const backend::Quantized* b_cast,
                                  const backend::Quantized* a_cast) const {
  const backend::Backend& be = backend::current();
  const auto cast = [&](const Tensor& t, backend::QuantSpec spec, const char* role) {
    if (delayed)
      return amp::delayed_quantize(t, spec, *delayed, module_path + "." + role, record_amax);
    if (spec.stochastic) {
      spec.seed = rounding_seed;
      spec.stream = rounding_stream(module_path, product, role);
    }
    return be.quantize(t, spec);
  };
  const auto gemm = [&](const backend::Quantized& qa, const backend::Quantized& qb) {
    return accumulator && r.fast_accum ? backend::scaled_gemm_modeled(qa, qb, *accumulator)
                                       : be.scaled_gemm(qa, qb, DType::f32);
  };
  Tensor c;
  if (amp::fp8_collecting()) {  // quantize makes operands contiguous anyway: once, for both
    const Tensor ac = a.contiguous();
    const backend::Quantized qa = a_cast ? *a_cast : cast(ac, r.a, a_role);
    amp::record_fp8_operand(fp8_site, product, 0, ac, qa);
    // An operand handed over already cast (an FP8-gathered weight, a saved FP8 input) has no
    // high-precision source here to measure it against: not recorded.
    if (b_cast) {
      c = gemm(qa, *b_cast);
    } else {
      const Tensor bc = b.contiguous();
      const backend::Quantized qb = cast(bc, r.b, b_role);
      amp::record_fp8_operand(fp8_site, product, 1, bc, qb);
      c = gemm(qa, qb);
    }
  } else {
    c = gemm(a_cast ? *a_cast : cast(a, r.a, a_role), b_cast ? *b_cast : cast(b, r.b, b_role));
  }
  if (bias.defined()) c = be.binary(backend::BinaryOp::add, c, bias, c.shape(), DType::f32);
  return c;
}

namespace {

// An FP8-gathered weight serves the recipe's output and grad_input products as it is: it must
// have been cast by that product's weight spec (the gather casts by the same table line).
void check_filed_weight(const char* op, const backend::Quantized& w,
                        const amp::LinearRecipe* recipe, amp::WeightCast cast) {
  const std::string path(amp::module_path());
  MIXPREC_CHECK(recipe != nullptr, op,
                "the weight of '" + path +
                    "' was all-gathered in FP8 (enable_fsdp_float8_all_gather), but this linear "
                    "runs no FP8 recipe here (an fp32 module or op override keeps it out); add '" +
                    path + "' to filter_fqns");
  const backend::QuantSpec& want =
      cast == amp::WeightCast::output ? recipe->output.b : recipe->grad_input.b;
  MIXPREC_CHECK(
      amp::gathers_weight_in_fp8(*recipe) && w.spec.element == want.element &&
          w.spec.block == want.block && w.spec.rule == want.rule && w.spec.pow2 == want.pow2,
      op,
      "the weight of '" + path + "' was all-gathered as " + backend::describe(w.spec) +
          ", which recipe " + recipe->name + " does not read (" + backend::describe(want) + ")");
}

}  // namespace

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
  p.b = bias.defined() ? bias.detach().contiguous() : Tensor();  // not rounded
  p.x_shape = x.shape();
  p.x_dtype = x.dtype();
  p.w_dtype = weight.dtype();
  if (site && p.rows > 0) p.recipe = amp::linear_recipe_here(p.out, p.in, *site);
  p.grouped_site = site == amp::RecipeSite::grouped;
  p.w_fp8 = amp::filed_fp8_weight(weight);
  if (p.w_fp8) {
    MIXPREC_CHECK(p.w_fp8->data.shape() == weight.shape() && weight.offset() == 0, op,
                  "the weight of '" + std::string(amp::module_path()) +
                      "' is a view of an FP8-gathered weight (" +
                      shape_to_string(p.w_fp8->data.shape()) + "); only the whole weight is read");
    check_filed_weight(op, *p.w_fp8, p.recipe, amp::WeightCast::output);
    // grad_input's own cast, where the recipe's output cast does not serve it (rowwise, MX).
    p.w_fp8_t = amp::filed_fp8_weight(weight, amp::WeightCast::grad_input);
    if (p.w_fp8_t) check_filed_weight(op, *p.w_fp8_t, p.recipe, amp::WeightCast::grad_input);
    MIXPREC_CHECK(p.w_fp8_t || amp::weight_cast_serves_both_products(*p.recipe), op,
                  "the weight of '" + std::string(amp::module_path()) +
                      "' was all-gathered in FP8 for output only; recipe " + p.recipe->name +
                      " reads it with other blocks in grad_input");
  } else
    p.w = precision_operand(weight.detach().contiguous(), p.precision);
  if (p.recipe && p.recipe->delayed) {
    p.delayed = amp::delayed_scaling_here();
    MIXPREC_CHECK(p.delayed != nullptr, op,
                  std::string("recipe ") + p.recipe->name +
                      " casts with amax histories, and the autocast guard holds none (its "
                      "options' delayed_scaling: the trainer gives one)");
    p.record_amax = GradMode::is_enabled();
  }
  if (p.recipe) {
    p.fp8_site = amp::fp8_site_here();
    p.accumulator = amp::accumulator_here();
    p.module_path = std::string(amp::module_path());
    p.rounding_seed = amp::rounding_seed_here();
  }
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
        .copy_from(fp8_product(recipe->output, x2, "input", w, "weight", b, amp::Fp8Product::fwd,
                               w_fp8 ? &*w_fp8 : nullptr, x_fp8 ? &*x_fp8 : nullptr));
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
  if (want_w) r.dw = Tensor::empty({out, in}, acc_dtype(w_dtype));
  if (want_b) r.db = backend::current().reduce_to_shape(g, {out}, acc_dtype(g.dtype()));
  return r;
}

void LinearProduct::grad_x(const Grads& g) const {
  if (recipe && recipe->grad_input.fp8) {  // dX = dY·W: A = dY [rows, out], B = Wᵀ [in, out]
    // The gathered FP8 weight: grad_input's own cast, or output's bytes and scales transposed.
    std::optional<backend::Quantized> wt;
    if (w_fp8_t)
      wt = backend::Quantized{w_fp8_t->data.contiguous(), w_fp8_t->scales, w_fp8_t->spec,
                              w_fp8_t->tensor_amax};
    else if (w_fp8)
      wt = backend::Quantized{w_fp8->data.transpose(0, 1).contiguous(),
                              w_fp8->scales.transpose(0, 1).contiguous(), recipe->grad_input.b,
                              w_fp8->tensor_amax};
    g.dx.view({rows, in})
        .copy_from(fp8_product(recipe->grad_input, g.operand, "grad_output",
                               w_fp8 ? Tensor() : w.transpose(0, 1), "weight", {},
                               amp::Fp8Product::dgrad, wt ? &*wt : nullptr));
    return;
  }
  backend::current().gemm(rows, in, out, 1.0f, {g.operand.dtype(), g.operand.raw_data(), out},
                          {w.dtype(), w.raw_data(), in}, 0.0f, {x_dtype, g.dx.raw_data(), in}, 1);
}

namespace {

// Xᵀ [cols, rows] in f32 from a saved FP8 cast of X [rows, cols]: each value times its block's
// descale in f32. That is the value's correct rounding for the recipes that come here: their
// descales are powers of two, or DeepSeek's divide-form f32 scale, whose product with an FP8
// value (at most 4 significant bits) rounds once.
Tensor widen_transposed(const backend::Quantized& q) {
  const int64_t rows = q.data.size(0), cols = q.data.size(1);
  const int64_t block_cols = backend::resolved_block(q.spec, rows, cols).cols;
  const backend::Descales d = backend::descales(q);
  const Tensor data = q.data.contiguous();
  const auto* in = static_cast<const uint8_t*>(data.raw_data());
  Tensor out = Tensor::empty({cols, rows}, DType::f32);
  float* o = out.data<float>();
  parallel_for(rows, 16, [&](int64_t r0, int64_t r1) {
    std::vector<float> buf(static_cast<std::size_t>(cols));
    for (int64_t r = r0; r < r1; ++r) {
      widen_row_f32(q.spec.element, in + r * cols, buf.data(), buf.size());
      for (int64_t c = 0; c < cols; ++c)
        o[c * rows + r] = buf[static_cast<std::size_t>(c)] * d.at(r, c / block_cols);
    }
  });
  return out;
}

// t [rows, cols] followed by zero columns up to `cols` of them.
Tensor zero_padded_columns(const Tensor& t, int64_t cols) {
  Tensor out = Tensor::zeros({t.size(0), cols}, t.dtype());
  out.slice(1, 0, t.size(1)).copy_from(t);
  return out;
}

}  // namespace

void LinearProduct::cast_input_for_saving() {
  if (!recipe || !amp::save_fp8_activations_here(grouped_site) || !amp::saves_fp8_input(*recipe))
    return;
  x_fp8 = amp::quantize_once(x2, recipe->output.a);
}

void LinearProduct::grad_w(const Grads& g) const {
  if (recipe && recipe->grad_weight.fp8) {  // dW = dYᵀ·X: A = dYᵀ [out, rows], B = Xᵀ [in, rows]
    // A saved FP8 input: transposed as it is when grad_weight's blocks are output's transposed
    // (tensorwise); else widened back to f32 and cast by grad_weight's blocks (DeepSeek-V3's
    // 1x128 tiles turned into 128x1: the input is quantized twice).
    std::optional<backend::Quantized> xt;
    Tensor x_source = x_fp8 ? Tensor() : x2.transpose(0, 1);
    if (x_fp8 && amp::input_cast_serves_grad_weight(*recipe))
      xt = backend::Quantized{x_fp8->data.transpose(0, 1).contiguous(),
                              x_fp8->scales.transpose(0, 1).contiguous(), recipe->grad_weight.b,
                              x_fp8->tensor_amax};
    else if (x_fp8)
      x_source = widen_transposed(*x_fp8);
    // NVFP4 casts runs of 16 tokens: zero columns pad both operands (TE pads likewise), which
    // adds nothing to the product, nor to an amax, nor to a run's transform. (Its input is
    // never a saved FP8 cast: saves_fp8_input refuses NVFP4.)
    Tensor dyt = g.operand.transpose(0, 1);
    if (const int64_t m = amp::token_multiple(*recipe); rows % m != 0) {
      dyt = zero_padded_columns(dyt, (rows + m - 1) / m * m);
      x_source = zero_padded_columns(x_source, dyt.size(1));
    }
    Tensor(g.dw).copy_from(fp8_product(recipe->grad_weight, dyt, "grad_output", x_source, "input",
                                       {}, amp::Fp8Product::wgrad, xt ? &*xt : nullptr));
    return;
  }
  backend::current().gemm(out, in, rows, 1.0f, {g.operand.dtype(), g.operand.raw_data(), out, true},
                          {x2.dtype(), x2.raw_data(), in}, 0.0f,
                          {g.dw.dtype(), g.dw.raw_data(), in}, 1);
}

}  // namespace mixprec::detail
