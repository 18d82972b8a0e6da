// Low-precision linear recipes (amp/linear_recipe.h): the table's products are well formed,
// `linear` under an AutocastGuard with a recipe runs each FP8 product as the quantize + scaled
// GEMM of that product's operands (the same bits), and the filters keep the linears torchtitan
// keeps in the compute dtype.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "mixprec/amp/autocast.h"
#include "mixprec/amp/linear_recipe.h"
#include "mixprec/backend/backend.h"
#include "mixprec/ops.h"
#include "ops/linear_product.h"
#include "support/op_testing.h"

namespace mixprec::amp {
namespace {

using mixprec::testing::error_of;
using mixprec::testing::randn;
using mixprec::testing::same_bits;

std::vector<const LinearRecipe*> recipes() {
  std::vector<const LinearRecipe*> out;
  for (const LinearRecipe& r : linear_recipes())
    if (!r.delayed) out.push_back(&r);  // its scales come from a history (delayed_scaling_test)
  return out;
}

// What a product of the recipe gives, composed by hand from the backend's kernels: C = A·Bᵀ
// in f32 (high-precision products: the bf16 operands' f32 GEMM). A stochastic cast draws as a
// linear with no module path under key `seed` draws for `product`'s operands.
Tensor by_hand(const ProductRecipe& p, const Tensor& a, const Tensor& b,
               Fp8Product product = Fp8Product::fwd, uint64_t seed = 0,
               std::string_view module = "") {
  const backend::Backend& be = backend::current();
  if (!p.fp8) return matmul(a.to(DType::f32), b.to(DType::f32).transpose(0, 1));
  const char* roles[3][2] = {
      {"input", "weight"}, {"grad_output", "weight"}, {"grad_output", "input"}};
  backend::QuantSpec sa = p.a, sb = p.b;
  for (auto [spec, role] : {std::pair{&sa, roles[static_cast<int>(product)][0]},
                            std::pair{&sb, roles[static_cast<int>(product)][1]}})
    if (spec->stochastic) {
      spec->seed = seed;
      spec->stream = mixprec::detail::rounding_stream(module, product, role);
    }
  return be.scaled_gemm(be.quantize(a, sa), be.quantize(b, sb), DType::f32);
}

TEST(LinearRecipe, EveryProductsOperandsShareAKStep) {
  const Tensor x = randn({64, 256}, DType::bf16, 1), w = randn({128, 256}, DType::bf16, 2);
  const Tensor dy = randn({64, 128}, DType::bf16, 3);
  for (const LinearRecipe* r : recipes()) {
    const std::pair<const ProductRecipe*, std::pair<Tensor, Tensor>> products[] = {
        {&r->output, {x, w}},
        {&r->grad_input, {dy, w.transpose(0, 1)}},
        {&r->grad_weight, {dy.transpose(0, 1), x.transpose(0, 1)}}};
    for (const auto& [p, ab] : products) {
      if (!p->fp8) continue;
      EXPECT_NO_THROW(by_hand(*p, ab.first, ab.second)) << r->name;
    }
    EXPECT_EQ(&find_linear_recipe(r->section, r->name, "test"), r);
  }
}

TEST(LinearRecipe, NamesAliasesAndSectionsAreChecked) {
  EXPECT_STREQ(find_linear_recipe("mx", "mxfp8_rceil", "t").name, "mxfp8_cublas_rceil");
  EXPECT_STREQ(find_linear_recipe("float8", "blockwise", "t").name, "deepseek_v3");
  const std::string m =
      error_of([] { find_linear_recipe("mx", "rowwise", "quantize.linear.mx.recipe_name"); });
  EXPECT_NE(m.find("quantize.linear.mx.recipe_name"), std::string::npos) << m;
  EXPECT_NE(m.find("unknown mx recipe 'rowwise'"), std::string::npos) << m;
  EXPECT_NE(m.find("mxfp8_cublas_rceil"), std::string::npos) << m;
  EXPECT_EQ(m.find("tensorwise"), std::string::npos) << m;  // other sections' names are not offered
}

// linear(x, w) under the recipe: output, dX and dW are the hand-composed products' bits
// (te_nvfp4's stochastic casts by the guard's key and each operand's stream).
TEST(LinearRecipe, LinearRunsEachProductByItsRecipe) {
  const int64_t tokens = 48, in = 256, out = 160;
  constexpr uint64_t kSeed = 0x5eed;
  for (const LinearRecipe* r : recipes()) {
    Tensor x = randn({2, tokens / 2, in}, DType::f32, 4).set_requires_grad();
    Tensor w = randn({out, in}, DType::f32, 5, 0.05).set_requires_grad();
    const Tensor dy = randn({2, tokens / 2, out}, DType::bf16, 6);
    Tensor y;
    {
      AutocastGuard guard(DType::bf16, {.linear_recipe = r, .rounding_seed = kSeed});
      y = linear(x, w);
    }
    y.backward(dy);
    const Tensor xb = x.detach().to(DType::bf16).view({tokens, in});
    const Tensor wb = w.detach().to(DType::bf16);
    const Tensor g = dy.view({tokens, out});
    EXPECT_EQ(y.dtype(), DType::bf16) << r->name;
    EXPECT_TRUE(same_bits(y.view({tokens, out}), by_hand(r->output, xb, wb).to(DType::bf16)))
        << r->name << " output";
    EXPECT_TRUE(same_bits(x.grad().view({tokens, in}),
                          by_hand(r->grad_input, g, wb.transpose(0, 1), Fp8Product::dgrad, kSeed)
                              .to(DType::bf16)
                              .to(DType::f32)))
        << r->name << " grad_input";
    if (r->grad_weight.fp8) {
      EXPECT_TRUE(same_bits(w.grad(), by_hand(r->grad_weight, g.transpose(0, 1), xb.transpose(0, 1),
                                              Fp8Product::wgrad, kSeed)))
          << r->name << " grad_weight";
    }
  }
}

// te_nvfp4's gradient casts round stochastically by the guard's key: the same key gives the
// same gradients, another key other ones (and the forward, rounded to nearest, the same).
// grad_weight casts along the tokens in runs of 16: another count pads both operands with
// zero tokens, as TE does (the per-expert linears of an MoE get any count).
TEST(LinearRecipe, TeNvfp4GradientsDrawFromTheGuardsKey) {
  const LinearRecipe& r = find_linear_recipe("mx", "te_nvfp4", "test");
  constexpr const char* kPath = "blocks.3.mlp.w_up";
  struct Run {
    Tensor x, w, dy, y, dx, dw;
  };
  const auto run = [&](uint64_t seed, int64_t tokens) {
    Run o;
    Tensor x = randn({tokens, 64}, DType::bf16, 11).set_requires_grad();
    Tensor w = randn({32, 64}, DType::bf16, 12, 0.1).set_requires_grad();
    o.dy = randn({tokens, 32}, DType::bf16, 13);
    {
      AutocastGuard guard(DType::bf16, {.linear_recipe = &r, .rounding_seed = seed});
      ModuleScope scope(kPath);
      o.y = linear(x, w);
    }
    o.y.backward(o.dy);
    o.x = x.detach(), o.w = w.detach(), o.dx = x.grad(), o.dw = w.grad();
    return o;
  };
  const Run a = run(1, 48), again = run(1, 48), other = run(2, 48);
  EXPECT_TRUE(same_bits(a.y, other.y));  // the forward rounds to nearest
  EXPECT_TRUE(same_bits(a.dx, again.dx) && same_bits(a.dw, again.dw));
  EXPECT_FALSE(same_bits(a.dx, other.dx));
  EXPECT_FALSE(same_bits(a.dw, other.dw));
  // 40 tokens: dW is the product of the operands padded to 48 with zero tokens.
  const Run odd = run(1, 40);
  const auto padded = [](const Tensor& t) {  // [n, 40] -> [n, 48]
    Tensor p = Tensor::zeros({t.size(0), 48}, t.dtype());
    p.slice(1, 0, 40).copy_from(t);
    return p;
  };
  const Tensor want =
      by_hand(r.grad_weight, padded(odd.dy.transpose(0, 1).contiguous()),
              padded(odd.x.transpose(0, 1).contiguous()), Fp8Product::wgrad, 1, kPath);
  EXPECT_TRUE(same_bits(odd.dw, want));
}

// The config's accumulator key lives in [quantize.linear.float8] alone and needs no check of
// its own because each recipe there has a product the accumulator model sums; MX's and NVFP4's
// block-scaled products have none (their spellings are refused by the policy).
TEST(LinearRecipe, EveryFloat8RecipeSumsInTheFastAccumulator) {
  for (const LinearRecipe& r : linear_recipes())
    EXPECT_EQ(sums_in_fast_accum(r), std::string_view(r.section) == "float8") << r.name;
}

// Every operand of every linear draws its own stream under one key: module paths, products and
// roles each change it.
TEST(LinearRecipe, StochasticStreamsDifferByModuleProductAndRole) {
  using mixprec::detail::rounding_stream;
  const uint64_t base = rounding_stream("blocks.0.attn.wq", Fp8Product::dgrad, "grad_output");
  EXPECT_NE(base, rounding_stream("blocks.0.attn.wk", Fp8Product::dgrad, "grad_output"));
  EXPECT_NE(base, rounding_stream("blocks.1.attn.wq", Fp8Product::dgrad, "grad_output"));
  EXPECT_NE(base, rounding_stream("blocks.0.attn.wq", Fp8Product::wgrad, "grad_output"));
  EXPECT_NE(base, rounding_stream("blocks.0.attn.wq", Fp8Product::dgrad, "input"));
  EXPECT_EQ(base, rounding_stream("blocks.0.attn.wq", Fp8Product::dgrad, "grad_output"));
}

// FP8 keeps about 2 significant digits; the products stay within a few percent of bf16's.
// NVFP4's E2M1 keeps 2 significant bits: within a fifth (each operand's error ~10%).
TEST(LinearRecipe, Fp8ProductsStayNearTheBf16Linear) {
  const Tensor x = randn({64, 256}, DType::f32, 7), w = randn({128, 256}, DType::f32, 8, 0.05);
  Tensor plain;
  {
    AutocastGuard guard(DType::bf16);
    plain = linear(x, w).to(DType::f64);
  }
  for (const LinearRecipe* r : recipes()) {
    AutocastGuard guard(DType::bf16, {.linear_recipe = r});
    const Tensor y = linear(x, w).to(DType::f64);
    const double rel = sub(y, plain).norm().item() / plain.norm().item();
    EXPECT_LT(rel, r->output.a.element == DType::f4_e2m1fn ? 0.2 : 0.06) << r->name;
    EXPECT_GT(rel, 1e-3) << r->name << ": not quantized?";
  }
}

bool quantized_here(const AutocastOptions& options, const char* scope, int64_t out, int64_t in) {
  AutocastGuard guard(DType::bf16, options);
  ModuleScope s(scope);
  return linear_recipe_here(out, in) != nullptr;
}

TEST(LinearRecipe, FiltersKeepTheLinearsTorchtitanKeepsInHighPrecision) {
  const LinearRecipe& tw = find_linear_recipe("float8", "tensorwise", "t");
  const LinearRecipe& rw = find_linear_recipe("float8", "rowwise", "t");
  AutocastOptions o{.linear_recipe = &tw, .recipe_skip = {"lm_head", "router"}};
  EXPECT_TRUE(quantized_here(o, "blocks.0.attn.wq", 256, 256));
  EXPECT_FALSE(quantized_here(o, "lm_head", 256, 256));             // filter_fqns
  EXPECT_FALSE(quantized_here(o, "blocks.1.moe.router", 16, 256));  // substring, as torchao
  EXPECT_FALSE(quantized_here(o, "blocks.0.attn.wq", 256, 200));    // 200 is not a multiple of 16
  o.fp32_modules = {"*.attn"};
  EXPECT_FALSE(quantized_here(o, "blocks.0.attn.wq", 256, 256));  // an fp32 module wins
  // auto_filter_small_kn: torchao's H100 thresholds, weight [N = out, K = in].
  AutocastOptions a{.linear_recipe = &tw, .recipe_skip = {kAutoFilterSmallKn}};
  EXPECT_FALSE(quantized_here(a, "w", 1024, 4096));
  EXPECT_TRUE(quantized_here(a, "w", 1040, 4096));
  EXPECT_TRUE(quantized_here(a, "w", 1024, 4112));
  a.linear_recipe = &rw;
  EXPECT_FALSE(quantized_here(a, "w", 2048, 8192));
  EXPECT_FALSE(quantized_here(a, "w", 8192, 1024));
  EXPECT_FALSE(quantized_here(a, "w", 4096, 2048));
  EXPECT_TRUE(quantized_here(a, "w", 4096, 2064));
  // Outside autocast, or with autocast off, nothing is quantized.
  EXPECT_EQ(linear_recipe_here(256, 256), nullptr);
  AutocastGuard off(DType::f32, {.linear_recipe = &tw});
  EXPECT_EQ(linear_recipe_here(256, 256), nullptr);
}

}  // namespace
}  // namespace mixprec::amp
