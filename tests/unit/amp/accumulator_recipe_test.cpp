// A recipe run with a GPU accumulator (policy `accumulator`, numerics/accumulator_model.h):
// the modeled scaled GEMM is each K-step's model_dot of the FP8 values' products times both
// descales, added in f32; the fast-accumulation products of the recipe table (torchao's and
// TE's output product, every product of the 128-block recipes) take it and the others stay
// the exact f32 GEMM's bits.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "mixprec/amp/autocast.h"
#include "mixprec/amp/linear_recipe.h"
#include "mixprec/backend/backend.h"
#include "mixprec/backend/modeled_gemm.h"
#include "mixprec/ops.h"
#include "support/op_testing.h"

namespace mixprec::amp {
namespace {

using mixprec::testing::randn;
using mixprec::testing::same_bits;

// The modeled GEMM against the ordinary one (an independent implementation of the K-steps,
// the descales and the epilogue): with the accumulator kept wide, the same within f32
// rounding; with H100's 14 bits, a tensorwise product (all of K in the accumulator) errs more
// than DeepSeek-V3's, whose partial sums are promoted to f32 every 128 products.
TEST(AccumulatorRecipe, ModeledGemmIsTheScaledGemmAndPromotionHelps) {
  const AccumulatorModel& h100 = *find_accumulator("h100", "test");
  const backend::Backend& be = backend::current();
  const int64_t k = 2048;
  double worst[2] = {};
  int at = 0;
  for (const char* name : {"tensorwise", "deepseek_v3"}) {
    SCOPED_TRACE(name);
    const ProductRecipe& p = find_any_linear_recipe(name)->output;
    // Same-sign operands: the running sum grows past each product, where truncation bites.
    const Tensor a = exp(randn({5, k}, DType::f32, 1)).to(DType::bf16);
    const Tensor b = exp(randn({7, k}, DType::f32, 2)).to(DType::bf16);
    const backend::Quantized qa = be.quantize(a, p.a), qb = be.quantize(b, p.b);
    const Tensor exact = be.scaled_gemm(qa, qb, DType::f32);
    AccumulatorModel wide = h100;
    wide.kept_bits = 40;
    const Tensor modeled_wide = backend::scaled_gemm_modeled(qa, qb, wide);
    const Tensor modeled = backend::scaled_gemm_modeled(qa, qb, h100);
    for (int64_t e = 0; e < 35; ++e) {
      const double want = exact.data<float>()[e];
      EXPECT_NEAR(modeled_wide.data<float>()[e], want, 1e-5 * std::fabs(want));
      worst[at] = std::max(worst[at], std::fabs(modeled.data<float>()[e] - want) / std::fabs(want));
    }
    ++at;
  }
  EXPECT_GT(worst[0], 1e-3);          // 14 bits over all of K: visible
  EXPECT_LT(3 * worst[1], worst[0]);  // promotion every 128 products
}

// linear under tensorwise with accumulator h100: the output (torchao's use_fast_accum) is the
// modeled GEMM's, grad_input and grad_weight the exact GEMM's bits; deepseek_v3 models all
// three; without the accumulator nothing changes.
TEST(AccumulatorRecipe, OnlyTheFastAccumulationProductsTakeTheModel) {
  const AccumulatorModel* h100 = find_accumulator("h100", "test");
  const int64_t tokens = 32, in = 256, out = 64;
  for (const char* name : {"tensorwise", "rowwise", "deepseek_v3"}) {
    const LinearRecipe* r = find_any_linear_recipe(name);
    auto run = [&](const AccumulatorModel* acc) {
      Tensor x = randn({tokens, in}, DType::f32, 4).set_requires_grad();
      Tensor w = randn({out, in}, DType::f32, 5, 0.05).set_requires_grad();
      Tensor y;
      {
        AutocastGuard guard(DType::bf16, {.linear_recipe = r, .accumulator = acc});
        y = linear(x, w);
      }
      y.backward(randn({tokens, out}, DType::bf16, 6));
      return std::vector<Tensor>{y.detach(), x.grad(), w.grad()};
    };
    const std::vector<Tensor> exact = run(nullptr), modeled = run(h100);
    const char* products[] = {"output", "grad_input", "grad_weight"};
    const ProductRecipe* recipe_products[] = {&r->output, &r->grad_input, &r->grad_weight};
    for (int i = 0; i < 3; ++i) {
      SCOPED_TRACE(std::string(name) + " " + products[i]);
      if (recipe_products[i]->fast_accum) {
        EXPECT_FALSE(same_bits(exact[i], modeled[i]));  // 14 kept bits show in bf16 results
        const double rel = sub(exact[i].to(DType::f64), modeled[i].to(DType::f64)).norm().item() /
                           exact[i].to(DType::f64).norm().item();
        EXPECT_LT(rel, 0.01);
      } else {
        EXPECT_TRUE(same_bits(exact[i], modeled[i]));
      }
    }
  }
}

TEST(AccumulatorRecipe, TheTableMarksTheSourcesFastAccumulation) {
  for (const LinearRecipe& r : linear_recipes()) {
    SCOPED_TRACE(r.name);
    const std::string section = r.section;
    const bool block128 = r.output.a.block.cols == 128;
    if (section == "mx") {  // Blackwell's block-scaled MMA: no Hopper model
      EXPECT_FALSE(r.output.fast_accum || r.grad_input.fast_accum || r.grad_weight.fast_accum);
    } else if (block128) {  // DeepGEMM / TE blockwise: every product, promoted per 128-K block
      EXPECT_TRUE(r.output.fast_accum && r.grad_input.fast_accum && r.grad_weight.fast_accum);
    } else {  // torchao's use_fast_accum, TE's fprop: the output product alone
      EXPECT_TRUE(r.output.fast_accum);
      EXPECT_FALSE(r.grad_input.fast_accum || r.grad_weight.fast_accum);
    }
  }
}

}  // namespace
}  // namespace mixprec::amp
