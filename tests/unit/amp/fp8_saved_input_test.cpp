// Linears that keep their input for backward as its FP8 cast (save_fp8_activations): the
// products' bits are unchanged where grad_weight's cast is output's transposed (tensorwise),
// grad_weight alone moves where the saved cast is widened and cast again (DeepSeek-V3's 1x128
// tiles into 128x1), the bf16 input is not kept, and linears reading one input share one cast.
#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include "mixprec/amp/autocast.h"
#include "mixprec/amp/linear_recipe.h"
#include "mixprec/autograd/grad_mode.h"
#include "mixprec/ops.h"
#include "mixprec/tensor/allocator.h"
#include "support/op_testing.h"

namespace mixprec::amp {
namespace {

using mixprec::testing::randn;
using mixprec::testing::same_bits;

struct LinearsRun {
  std::vector<Tensor> results;  // y, dx, dw of each linear
  std::size_t kept_after_forward = 0;
};

// `linears` linears reading one input x (a non-leaf, as a model's activations), forward under
// the recipe, the bytes still allocated after it (what the graph keeps), then backward.
LinearsRun run(const LinearRecipe* r, bool save, int linears) {
  const int64_t tokens = 64, in = 256, out = 128;
  Tensor x0 = randn({tokens, in}, DType::f32, 1).set_requires_grad();
  std::vector<Tensor> ws;
  for (int i = 0; i < linears; ++i)
    ws.push_back(randn({out, in}, DType::f32, 10 + i, 0.05).set_requires_grad());
  std::vector<Tensor> ys;
  std::size_t before = 0;
  LinearsRun result;
  {
    AutocastGuard guard(DType::bf16, {.linear_recipe = r, .save_fp8_activations = save});
    const Tensor x = mul(x0, x0).to(DType::bf16);  // the input, made in the region
    before = Allocator::instance().stats().current_bytes;
    for (const Tensor& w : ws) ys.push_back(linear(x, w));
  }
  result.kept_after_forward = Allocator::instance().stats().current_bytes - before;
  Tensor total = ys[0].to(DType::f32).sum();
  for (int i = 1; i < linears; ++i) total = add(total, ys[i].to(DType::f32).sum());
  total.backward();
  for (int i = 0; i < linears; ++i) result.results.push_back(ys[i].detach());
  result.results.push_back(x0.grad());
  for (const Tensor& w : ws) result.results.push_back(w.grad());
  return result;
}

TEST(Fp8SavedInput, TensorwiseKeepsEveryBitAndOneFp8Copy) {
  const LinearRecipe* tw = find_any_linear_recipe("tensorwise");
  ASSERT_TRUE(input_cast_serves_grad_weight(*tw));
  const LinearsRun bf16 = run(tw, false, 3), fp8 = run(tw, true, 3);
  for (std::size_t i = 0; i < bf16.results.size(); ++i)
    EXPECT_TRUE(same_bits(bf16.results[i], fp8.results[i])) << "result " << i;
  // Three linears read x [64, 256]: the bf16 copy (32 KiB) gives way to one FP8 cast (16 KiB
  // and a scale), not three.
  EXPECT_EQ(
      static_cast<int64_t>(bf16.kept_after_forward) - static_cast<int64_t>(fp8.kept_after_forward),
      64 * 256 * 2 - 64 * 256 - 4)
      << bf16.kept_after_forward << " vs " << fp8.kept_after_forward;
}

TEST(Fp8SavedInput, DeepSeekCastsTheSavedInputAgainForGradWeight) {
  const LinearRecipe* ds = find_any_linear_recipe("deepseek_v3");
  ASSERT_TRUE(saves_fp8_input(*ds));
  ASSERT_FALSE(input_cast_serves_grad_weight(*ds));
  const LinearsRun bf16 = run(ds, false, 1), fp8 = run(ds, true, 1);
  EXPECT_TRUE(same_bits(bf16.results[0], fp8.results[0])) << "output";
  EXPECT_TRUE(same_bits(bf16.results[1], fp8.results[1])) << "grad_input";
  EXPECT_FALSE(same_bits(bf16.results[2], fp8.results[2])) << "grad_weight: rounded twice";
  const double rel =
      sub(bf16.results[2].to(DType::f64), fp8.results[2].to(DType::f64)).norm().item() /
      bf16.results[2].to(DType::f64).norm().item();
  EXPECT_LT(rel, 0.05);
  EXPECT_LT(fp8.kept_after_forward, bf16.kept_after_forward);
}

// Evaluation and a checkpoint's forward (no grad) save nothing, and the region's cache holds
// no cast: inside the guard only the outputs remain.
TEST(Fp8SavedInput, ForwardsWithoutBackwardKeepNothing) {
  const LinearRecipe* tw = find_any_linear_recipe("tensorwise");
  const Tensor w = randn({128, 256}, DType::bf16, 3, 0.05);
  for (const bool grad : {false, true}) {
    Tensor x = randn({64, 256}, DType::bf16, 4);
    if (grad) x.set_requires_grad();
    std::optional<NoGradGuard> no_grad;
    if (!grad) no_grad.emplace();
    AutocastGuard guard(DType::bf16, {.linear_recipe = tw, .save_fp8_activations = true});
    const std::size_t before = Allocator::instance().stats().current_bytes;
    std::vector<Tensor> ys;
    for (int i = 0; i < 3; ++i) ys.push_back(linear(x, w));
    const std::size_t kept = Allocator::instance().stats().current_bytes - before;
    // Three bf16 outputs [64, 128]; with grad one FP8 cast of x [64, 256] and its scale more.
    EXPECT_EQ(kept, 3u * 64 * 128 * 2 + (grad ? 64u * 256 + 4 : 0u)) << "grad " << grad;
  }
}

TEST(Fp8SavedInput, RecipesWithoutAnFp8GradWeightKeepTheInput) {
  EXPECT_FALSE(saves_fp8_input(*find_any_linear_recipe("rowwise_with_gw_hp")));
  EXPECT_FALSE(saves_fp8_input(*find_any_linear_recipe("te_delayed")));
  EXPECT_TRUE(saves_fp8_input(*find_any_linear_recipe("mxfp8_cublas")));
}

}  // namespace
}  // namespace mixprec::amp
