// MoE experts' grouped GEMMs by a recipe (torchtitan's [quantize.grouped_mm.*]): a stacked
// weight's groups under the grouped recipe give, group by group, the bits `linear` gives that
// group's x and weight slice under the same recipe (torchao quantizes per group: row scales of
// grad_weight over the group's tokens), forward and both gradients; fqns pick the groups; 2-d
// sources (shared experts) take the linear recipe, stacked ones never do.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "mixprec/amp/autocast.h"
#include "mixprec/amp/linear_recipe.h"
#include "mixprec/ops.h"
#include "mixprec/tensor/allocator.h"
#include "support/op_testing.h"

namespace mixprec::amp {
namespace {

using mixprec::testing::randn;
using mixprec::testing::same_bits;

TEST(GroupedRecipe, TableLinesNameLinearRecipes) {
  for (const GroupedRecipe& g : grouped_recipes()) {
    const LinearRecipe* r = find_grouped_recipe(g.section, g.name);
    ASSERT_NE(r, nullptr) << g.name;
    EXPECT_STREQ(r->name, g.linear);
  }
  EXPECT_STREQ(find_grouped_recipe("float8", "rowwise")->name, "rowwise");
  EXPECT_STREQ(find_grouped_recipe("mx", "mxfp8")->name, "mxfp8_cublas_rceil");  // torchao RCEIL
  EXPECT_EQ(find_grouped_recipe("mx", "rowwise"), nullptr);
  EXPECT_EQ(find_grouped_recipe("float8", "tensorwise"), nullptr);  // torchao has rowwise only
  EXPECT_EQ(grouped_recipe_names("float8"), "rowwise");
}

struct GroupedRun {
  std::vector<Tensor> ys, dxs;
  Tensor dw;
  std::size_t kept_after_forward = 0;  // bytes the forward left allocated (the graph's)
};

// Experts 0..3 of a stacked [4, out, in] weight with 40, 0 (idle), 24 and 72 tokens, run as
// one grouped GEMM under `options` (module paths moe.experts.<g>).
GroupedRun grouped(const AutocastOptions& options, const Tensor& w) {
  const std::vector<int64_t> rows = {40, 0, 24, 72};
  std::vector<Tensor> xs;
  std::vector<std::string> scopes;
  for (std::size_t g = 0; g < rows.size(); ++g) {
    xs.push_back(randn({rows[g], w.size(2)}, DType::f32, 10 + g).set_requires_grad());
    scopes.push_back("moe.experts." + std::to_string(g));
  }
  Tensor wg = w.detach().set_requires_grad();
  GroupedRun r;
  const std::size_t before = Allocator::instance().stats().current_bytes;
  {
    AutocastGuard guard(DType::bf16, options);
    r.ys = grouped_linear(xs, wg, Tensor(), scopes);
  }
  r.kept_after_forward = Allocator::instance().stats().current_bytes - before;
  Tensor loss;
  for (std::size_t g = 0; g < rows.size(); ++g) {
    const Tensor dy = randn(r.ys[g].shape(), DType::bf16, 20 + g);
    const Tensor term = sum(mul(r.ys[g].to(DType::f32), dy.to(DType::f32)));
    loss = loss.defined() ? add(loss, term) : term;
  }
  loss.backward();
  for (const Tensor& x : xs) r.dxs.push_back(x.grad());
  r.dw = wg.grad();
  return r;
}

// Group g alone through `linear` under the same recipe as a linear recipe.
GroupedRun one_by_one(const LinearRecipe* recipe, const Tensor& w) {
  const std::vector<int64_t> rows = {40, 0, 24, 72};
  GroupedRun r;
  std::vector<Tensor> dws;
  for (std::size_t g = 0; g < rows.size(); ++g) {
    Tensor x = randn({rows[g], w.size(2)}, DType::f32, 10 + g).set_requires_grad();
    Tensor wg = w.detach().select(0, static_cast<int64_t>(g)).contiguous().set_requires_grad();
    Tensor y;
    {
      AutocastGuard guard(DType::bf16, {.linear_recipe = recipe});
      y = linear(x, wg);
    }
    const Tensor dy = randn(y.shape(), DType::bf16, 20 + g);
    sum(mul(y.to(DType::f32), dy.to(DType::f32))).backward();
    r.ys.push_back(y);
    r.dxs.push_back(x.grad());
    dws.push_back(rows[g] == 0 ? Tensor::zeros(wg.shape(), DType::f32) : wg.grad());
  }
  r.dw = stack(dws, 0);
  return r;
}

void expect_same(const GroupedRun& a, const GroupedRun& b, const std::string& what) {
  ASSERT_EQ(a.ys.size(), b.ys.size());
  for (std::size_t g = 0; g < a.ys.size(); ++g) {
    EXPECT_TRUE(same_bits(a.ys[g], b.ys[g])) << what << " y of expert " << g;
    EXPECT_TRUE(same_bits(a.dxs[g], b.dxs[g])) << what << " dx of expert " << g;
  }
  EXPECT_TRUE(same_bits(a.dw, b.dw)) << what << " dW";
}

TEST(GroupedRecipe, EachGroupRunsAsItsOwnLinearByTheRecipe) {
  const Tensor w = randn({4, 96, 128}, DType::f32, 1, 0.05);
  for (const char* name : {"rowwise", "mxfp8_cublas_rceil", "deepseek_v3"}) {
    const LinearRecipe* r = find_any_linear_recipe(name);
    const GroupedRun by_recipe = grouped({.grouped_recipe = r, .grouped_fqns = {"experts"}}, w);
    expect_same(by_recipe, one_by_one(r, w), name);
    // And the recipe did run: bf16's grouped GEMM gives other bits.
    const GroupedRun bf16 = grouped({}, w);
    EXPECT_FALSE(same_bits(by_recipe.ys[0], bf16.ys[0])) << name;
    EXPECT_FALSE(same_bits(by_recipe.dw, bf16.dw)) << name;
    // The idle expert's gradient slice is zeros.
    EXPECT_TRUE(same_bits(by_recipe.dw.select(0, 1), Tensor::zeros({96, 128}, DType::f32))) << name;
  }
}

TEST(GroupedRecipe, OnlyTheGroupsFqnsNameAndNeverByTheLinearRecipe) {
  const Tensor w = randn({4, 96, 128}, DType::f32, 1, 0.05);
  const LinearRecipe* rowwise = find_any_linear_recipe("rowwise");
  const GroupedRun bf16 = grouped({}, w);
  // fqns naming no group, and a linear recipe alone: a stacked weight stays in bf16.
  expect_same(grouped({.grouped_recipe = rowwise, .grouped_fqns = {"shared_experts"}}, w), bf16,
              "fqns shared_experts");
  expect_same(grouped({.linear_recipe = rowwise, .recipe_skip = {}}, w), bf16, "linear recipe");
  // fqns naming expert 2 only: it runs by the recipe, the others in bf16.
  const GroupedRun two = grouped({.grouped_recipe = rowwise, .grouped_fqns = {"experts.2"}}, w);
  const GroupedRun all = grouped({.grouped_recipe = rowwise, .grouped_fqns = {"experts"}}, w);
  EXPECT_TRUE(same_bits(two.ys[0], bf16.ys[0]));
  EXPECT_TRUE(same_bits(two.ys[2], all.ys[2]));
  EXPECT_FALSE(same_bits(two.ys[2], bf16.ys[2]));
  EXPECT_TRUE(same_bits(two.dw.select(0, 2), all.dw.select(0, 2)));
  EXPECT_TRUE(same_bits(two.dw.select(0, 3), bf16.dw.select(0, 3)));
}

TEST(GroupedRecipe, TwoDimensionalSourcesTakeTheLinearRecipe) {
  // A shared expert's 2-d weight in a grouped GEMM: nn.Linear's, so the linear recipe (and its
  // skip list) applies, the grouped one does not.
  const Tensor w = randn({96, 128}, DType::f32, 2, 0.05);
  const Tensor x = randn({32, 128}, DType::f32, 3);
  const LinearRecipe* rowwise = find_any_linear_recipe("rowwise");
  const auto run = [&](const AutocastOptions& o, bool grouped_op) {
    AutocastGuard guard(DType::bf16, o);
    ModuleScope scope("moe.shared_experts");
    return grouped_op ? grouped_linear({x}, std::vector<Tensor>{w}, std::vector<Tensor>{}).front()
                      : linear(x, w);
  };
  const Tensor by_linear = run({.linear_recipe = rowwise}, false);
  EXPECT_TRUE(same_bits(run({.linear_recipe = rowwise}, true), by_linear));
  const Tensor bf16 = run({}, false);
  EXPECT_FALSE(same_bits(by_linear, bf16));
  EXPECT_TRUE(same_bits(run({.grouped_recipe = rowwise, .grouped_fqns = {"experts"}}, true), bf16));
  EXPECT_TRUE(
      same_bits(run({.linear_recipe = rowwise, .recipe_skip = {"shared_experts"}}, true), bf16));
}

// save_fp8_activations in a grouped GEMM: each expert keeps its input as its output product's
// FP8 cast instead of bf16 (rowwise: one f32 scale per row), outputs and input gradients keep
// every bit, and the weight gradient is cast again from the saved FP8 rows (rows for output,
// columns of Xᵀ for grad_weight). Its scales are powers of two, so a value the first cast
// rounded to 3 mantissa bits is rounded to the same bits again unless it falls below the
// second cast's normal range: grad_weight moves by at most a few such values.
TEST(GroupedRecipe, SavedFp8InputsKeepOutputsAndInputGradientsAndTakeHalfTheBytes) {
  const Tensor w = randn({4, 48, 64}, DType::f32, 3, 0.05);
  const LinearRecipe* rw = find_grouped_recipe("float8", "rowwise");
  const AutocastOptions plain{.grouped_recipe = rw, .grouped_fqns = {"experts"}};
  AutocastOptions saving = plain;
  saving.save_fp8_grouped_activations = true;
  const GroupedRun a = grouped(plain, w), b = grouped(saving, w);
  for (std::size_t g = 0; g < a.ys.size(); ++g) {
    EXPECT_TRUE(same_bits(a.ys[g], b.ys[g])) << "output of expert " << g;
    EXPECT_TRUE(same_bits(a.dxs[g], b.dxs[g])) << "grad_input of expert " << g;
  }
  const double rel = sub(a.dw.to(DType::f64), b.dw.to(DType::f64)).norm().item() /
                     a.dw.to(DType::f64).norm().item();
  EXPECT_LT(rel, 1e-3);
  // 136 rows of 64: bf16 2 bytes an element, FP8 1 and a 4-byte scale per row.
  const int64_t rows = 40 + 24 + 72;
  EXPECT_EQ(static_cast<int64_t>(a.kept_after_forward) - static_cast<int64_t>(b.kept_after_forward),
            rows * 64 * 2 - (rows * 64 + 4 * rows))
      << a.kept_after_forward << " vs " << b.kept_after_forward;
}

}  // namespace
}  // namespace mixprec::amp
