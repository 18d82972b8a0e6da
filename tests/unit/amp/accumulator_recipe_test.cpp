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
#include "mixprec/numerics/convert.h"
#include "mixprec/ops.h"
#include "support/op_testing.h"

namespace mixprec::amp {
namespace {

using mixprec::testing::randn;
using mixprec::testing::same_bits;

std::vector<float> values(const backend::Quantized& q) {
  const Tensor d = q.data.contiguous();
  std::vector<float> v(static_cast<std::size_t>(d.numel()));
  widen_row_f32(q.spec.element, d.raw_data(), v.data(), v.size());
  return v;
}

// The modeled GEMM composed by hand from model_dot, element by element.
TEST(AccumulatorRecipe, ModeledGemmIsEachKStepsModelDotTimesTheDescales) {
  const AccumulatorModel& h100 = *find_accumulator("h100", "test");
  const backend::Backend& be = backend::current();
  for (const char* name : {"tensorwise", "deepseek_v3"}) {
    const ProductRecipe& p = find_any_linear_recipe(name)->output;
    const Tensor a = randn({5, 300}, DType::bf16, 1), b = randn({7, 300}, DType::bf16, 2);
    const backend::Quantized qa = be.quantize(a, p.a), qb = be.quantize(b, p.b);
    const Tensor got = backend::scaled_gemm_modeled(qa, qb, h100);
    const int64_t step = backend::scaled_gemm_k_step(qa, qb, "test");
    const std::vector<float> av = values(qa), bv = values(qb);
    const Tensor sa = qa.scales.contiguous(), sb = qb.scales.contiguous();
    for (int64_t i = 0; i < 5; ++i)
      for (int64_t j = 0; j < 7; ++j) {
        float want = 0;
        for (int64_t k0 = 0, s = 0; k0 < 300; k0 += step, ++s) {
          std::vector<double> prods;
          std::vector<int> exps;
          for (int64_t k = k0; k < std::min<int64_t>(300, k0 + step); ++k) {
            const float x = av[i * 300 + k], y = bv[j * 300 + k];
            prods.push_back(static_cast<double>(x) * y);
            exps.push_back(prods.back() == 0 ? 0 : product_exponent(x, -6, y, -6));
          }
          const int64_t ca = sa.size(1) == 1 ? 0 : s, cb = sb.size(1) == 1 ? 0 : s;
          const int64_t ra = i / backend::resolved_block(p.a, 5, 300).rows;
          const int64_t rb = j / backend::resolved_block(p.b, 7, 300).rows;
          const float da = descale_of(p.a.rule, sa.data<float>()[ra * sa.size(1) + ca]);
          const float db = descale_of(p.b.rule, sb.data<float>()[rb * sb.size(1) + cb]);
          want += model_dot(prods, h100, exps) * da * db;
        }
        EXPECT_EQ(got.data<float>()[i * 7 + j], want) << name << " [" << i << ", " << j << "]";
      }
    // With the accumulator kept wide the model is the exact sum: within f32 rounding of the
    // ordinary scaled GEMM.
    AccumulatorModel wide = h100;
    wide.kept_bits = 40;
    const Tensor exact = be.scaled_gemm(qa, qb, DType::f32);
    const Tensor modeled = backend::scaled_gemm_modeled(qa, qb, wide);
    for (int64_t e = 0; e < 35; ++e)
      EXPECT_NEAR(modeled.data<float>()[e], exact.data<float>()[e],
                  1e-5 * std::fabs(exact.data<float>()[e]) + 1e-6)
          << name;
  }
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
