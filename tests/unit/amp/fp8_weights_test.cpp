// A linear reading a weight filed in FP8 (amp/fp8_weights.h: what FSDP's FP8 all-gather hands
// the model): output, grad_input and grad_weight equal the products composed from the master's
// own casts, with grad_input's weight quantized from the transposed master on its own (so the
// shortcut of transposing the filed bytes and scales is checked, not assumed), bit for bit,
// on a weight whose dims are not multiples of 128.
#include <gtest/gtest.h>

#include "mixprec/amp/autocast.h"
#include "mixprec/amp/fp8_weights.h"
#include "mixprec/amp/linear_recipe.h"
#include "mixprec/backend/backend.h"
#include "mixprec/ops.h"
#include "support/op_testing.h"

namespace mixprec::amp {
namespace {

using mixprec::testing::error_of;
using mixprec::testing::randn;
using mixprec::testing::same_bits;

TEST(Fp8Weights, ALinearReadsTheFiledWeightAsTheMastersCasts) {
  const backend::Backend& be = backend::current();
  const int64_t tokens = 48, in = 272, out = 144;
  // Recipes with two weight casts (rowwise, MX) file grad_input's too, as a transposed view
  // the way FSDP's gather delivers it; grad_input must read it, not output's transposed.
  for (const char* name : {"tensorwise", "te_current", "te_blockwise", "deepseek_v3", "rowwise",
                           "rowwise_with_gw_hp", "mxfp8_cublas"}) {
    SCOPED_TRACE(name);
    const LinearRecipe* r = find_any_linear_recipe(name);
    ASSERT_TRUE(gathers_weight_in_fp8(*r));
    const Tensor master = randn({out, in}, DType::f32, 21, 0.05);
    Tensor w = fp8_weight_placeholder({out, in}, DType::bf16);
    w.set_requires_grad(true, DType::f32);
    file_fp8_weight(w, be.quantize(master, r->output.b));
    if (!weight_cast_serves_both_products(*r)) {
      const backend::Quantized t =
          be.quantize(master.transpose(0, 1).contiguous(), r->grad_input.b);
      file_fp8_weight(w, {t.data.transpose(0, 1).contiguous().transpose(0, 1), t.scales, t.spec},
                      WeightCast::grad_input);
    }
    Tensor x = randn({tokens, in}, DType::f32, 22).set_requires_grad();
    const Tensor dy = randn({tokens, out}, DType::bf16, 23);
    Tensor y;
    {
      AutocastGuard guard(DType::bf16, {.linear_recipe = r});
      y = linear(x, w);
    }
    y.backward(dy);
    forget_fp8_weight(w);
    EXPECT_FALSE(filed_fp8_weight(w).has_value());

    const Tensor xb = x.detach().to(DType::bf16);
    const Tensor masterT = master.transpose(0, 1).contiguous();
    const auto product = [&](const ProductRecipe& p, const Tensor& a,
                             const backend::Quantized& qb) {
      return be.scaled_gemm(be.quantize(a, p.a), qb, DType::f32);
    };
    EXPECT_TRUE(
        same_bits(y, product(r->output, xb, be.quantize(master, r->output.b)).to(DType::bf16)))
        << "output";
    EXPECT_TRUE(
        same_bits(x.grad(), product(r->grad_input, dy, be.quantize(masterT, r->grad_input.b))
                                .to(DType::bf16)
                                .to(DType::f32)))
        << "grad_input";
    if (r->grad_weight.fp8) {
      EXPECT_TRUE(same_bits(
          w.grad(), product(r->grad_weight, dy.transpose(0, 1).contiguous(),
                            be.quantize(xb.transpose(0, 1).contiguous(), r->grad_weight.b))))
          << "grad_weight";
    }
  }
}

TEST(Fp8Weights, ATwoCastRecipeWithoutGradInputsCastIsAnError) {
  const LinearRecipe* rw = find_any_linear_recipe("rowwise");
  Tensor w = fp8_weight_placeholder({32, 64}, DType::bf16);
  file_fp8_weight(w, backend::current().quantize(randn({32, 64}, DType::f32, 1), rw->output.b));
  const std::string m = error_of([&] {
    AutocastGuard guard(DType::bf16, {.linear_recipe = rw});
    ModuleScope scope("blocks.0.attn.wq");
    linear(randn({4, 64}, DType::bf16, 2), w);
  });
  EXPECT_NE(m.find("for output only"), std::string::npos) << m;
  forget_fp8_weight(w);
}

TEST(Fp8Weights, AFiledWeightReadOtherwiseIsAnError) {
  const LinearRecipe* tw = find_any_linear_recipe("tensorwise");
  Tensor w = fp8_weight_placeholder({32, 64}, DType::bf16);
  file_fp8_weight(w, backend::current().quantize(randn({32, 64}, DType::f32, 1), tw->output.b));
  const Tensor x = randn({4, 64}, DType::bf16, 2);
  // No recipe here: the linear would have to read bf16 bytes that do not exist.
  std::string m = error_of([&] {
    AutocastGuard guard(DType::bf16);
    ModuleScope scope("blocks.0.attn.wq");
    linear(x, w);
  });
  EXPECT_NE(m.find("'blocks.0.attn.wq' was all-gathered in FP8"), std::string::npos) << m;
  // A view of it: only the whole weight is read.
  m = error_of([&] {
    AutocastGuard guard(DType::bf16, {.linear_recipe = tw});
    linear(x, w.slice(0, 0, 16));
  });
  EXPECT_NE(m.find("view of an FP8-gathered weight"), std::string::npos) << m;
  EXPECT_THROW(w.to_doubles(), Error);
  forget_fp8_weight(w);
}

}  // namespace
}  // namespace mixprec::amp
