// Autocast machinery: the hook's cost when off, guards (nesting, disabling, f32 = off,
// per thread), the weight-cast cache (one cast per weight per region, gradients intact),
// per-op overrides and module-scope overrides.
#include "mixprec/amp/autocast.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "mixprec/ops.h"
#include "support/op_testing.h"

namespace mixprec::amp {
namespace {

using mixprec::testing::error_of;
using mixprec::testing::randn;
using mixprec::testing::same_bits;
using mixprec::testing::with_threads;

constexpr DType f32 = DType::f32, bf16 = DType::bf16;

TEST(Autocast, HookHandsBackTheInputsThemselvesWhenNothingIsCast) {
  const Tensor x = randn({4, 8}, f32, 1), w = randn({3, 8}, f32, 2);
  const Tensor b;  // an undefined optional input
  {
    const auto [x1, w1, b1] = autocast_args("linear", x, w, b);
    EXPECT_EQ(&x1, &x);
    EXPECT_EQ(&w1, &w);
    EXPECT_EQ(&b1, &b);
    const std::vector<Tensor> list{x, x};
    const AutocastList l("concat", list);
    EXPECT_EQ(&l.get(), &list);
  }
  AutocastGuard guard(bf16);
  const Tensor xb = x.to(bf16);
  const auto [x2, b2] = autocast_args("linear", xb, b);  // already bf16; undefined stays so
  EXPECT_EQ(&x2, &xb);
  EXPECT_FALSE(b2.defined());
  const auto [x3] = autocast_args("softmax", x);  // fp32 op, f32 input
  EXPECT_EQ(&x3, &x);
  EXPECT_EQ(autocast_stats().casts, 0);
}

TEST(Autocast, GuardsNestDisableAndRestore) {
  EXPECT_FALSE(autocast_enabled());
  const Tensor x = randn({4, 8}, f32, 3), w = randn({3, 8}, f32, 4);
  {
    AutocastGuard outer(bf16);
    EXPECT_TRUE(autocast_enabled());
    EXPECT_EQ(autocast_dtype(), bf16);
    EXPECT_EQ(linear(x, w).dtype(), bf16);
    {
      AutocastGuard off(bf16, /*enabled=*/false);
      EXPECT_FALSE(autocast_enabled());
      EXPECT_EQ(linear(x, w).dtype(), f32);
      {
        AutocastGuard half(DType::f16);
        EXPECT_EQ(linear(x, w).dtype(), DType::f16);
      }
      EXPECT_FALSE(autocast_enabled());
    }
    {
      AutocastGuard f32_is_off(f32);
      EXPECT_FALSE(autocast_enabled());
      EXPECT_EQ(linear(x, w).dtype(), f32);
    }
    EXPECT_TRUE(autocast_enabled());
    EXPECT_EQ(autocast_dtype(), bf16);
  }
  EXPECT_FALSE(autocast_enabled());
  EXPECT_EQ(linear(x, w).dtype(), f32);
  const std::string m = error_of([] { AutocastGuard g(DType::f64); });
  EXPECT_NE(m.find("f64"), std::string::npos) << m;
  EXPECT_FALSE(autocast_enabled());  // a guard that threw changed nothing
}

// Ops made of other ops (einsum, cosine_similarity, where, stack, addcmul, index_put) run
// their parts in a disabled region of their own; the caller's region is as it was after
// them, and after an op that throws from inside such a part or refuses autocast.
TEST(Autocast, OpsWithInnerRegionsAndErrorsRestoreTheRegion) {
  const Tensor a = randn({3, 4}, f32, 5), b = randn({4, 2}, f32, 6), h = randn({3, 4}, bf16, 7);
  const Tensor cond = gt(a, 0.0);
  AutocastGuard outer(DType::f16);
  auto expect_region = [](const char* after) {
    EXPECT_TRUE(autocast_enabled()) << after;
    EXPECT_EQ(autocast_dtype(), DType::f16) << after;
  };
  EXPECT_EQ(einsum("ij,jk", {a, b}).dtype(), DType::f16);
  expect_region("einsum");
  EXPECT_EQ(cosine_similarity(a, h).dtype(), f32);
  expect_region("cosine_similarity");
  EXPECT_EQ(where(cond, a, h).dtype(), f32);
  expect_region("where");
  EXPECT_EQ(stack({a, h}).dtype(), f32);
  expect_region("stack");
  EXPECT_EQ(addcmul(h, h, h).dtype(), bf16);
  expect_region("addcmul");
  EXPECT_EQ(index_put(a, {Tensor::from_vector<int64_t>({1}, {1})}, h.slice(0, 0, 1)).dtype(), f32);
  expect_region("index_put");
  EXPECT_THROW(einsum("ij,jk", {a, Tensor::ones({5, 2})}), Error);  // thrown inside
  expect_region("a failed einsum");
  EXPECT_THROW(binary_cross_entropy(a, a), Error);  // refused under autocast
  expect_region("a refused binary_cross_entropy");
  {
    AutocastGuard off(bf16, /*enabled=*/false);
    EXPECT_EQ(einsum("ij,jk", {a, b}).dtype(), f32);
    EXPECT_FALSE(autocast_enabled());
  }
  expect_region("a nested disabled region");
}

TEST(Autocast, StateIsPerThread) {
  const Tensor x = randn({4, 8}, f32, 5), w = randn({3, 8}, f32, 6);
  AutocastGuard guard(bf16);
  bool other_enabled = true;
  DType other_dtype = bf16;
  std::thread t([&] {
    other_enabled = autocast_enabled();
    other_dtype = linear(x, w).dtype();
  });
  t.join();
  EXPECT_FALSE(other_enabled);
  EXPECT_EQ(other_dtype, f32);
  EXPECT_EQ(linear(x, w).dtype(), bf16);
}

TEST(Autocast, EachWeightIsCastOncePerRegionAndGetsItsGradient) {
  Tensor w = randn({16, 32}, f32, 7, 0.1).set_requires_grad();
  const Tensor x = randn({4, 32}, f32, 8);  // an activation: not cached
  Tensor w2 = w.detach().clone().set_requires_grad();
  {
    AutocastGuard guard(bf16);
    Tensor loss = sum(linear(x, w));
    loss = add(loss, sum(linear(x, w)));
    {
      AutocastGuard inner(bf16, /*enabled=*/false);  // the region (and its cache) goes on
      AutocastGuard again(bf16);
      loss = add(loss, sum(linear(x, w)));
    }
    // w once; x and each bf16 linear output (for sum, an fp32 op) three times.
    EXPECT_EQ(autocast_stats().casts, 7);
    EXPECT_EQ(autocast_stats().cache_hits, 2);
    loss.backward();
  }
  EXPECT_EQ(autocast_stats().casts, 7);  // readable after the region
  // By hand: one cast of w2 used three times; the gradients meet in f32 at w2.
  const Tensor wb = w2.to(bf16), xb = x.to(bf16);
  Tensor loss2 = sum(linear(xb, wb).to(f32));
  loss2 = add(loss2, sum(linear(xb, wb).to(f32)));
  loss2 = add(loss2, sum(linear(xb, wb).to(f32)));
  loss2.backward();
  EXPECT_EQ(w.grad().dtype(), f32);
  EXPECT_TRUE(same_bits(w.grad(), w2.grad()));

  // A new region starts with an empty cache and fresh counters.
  AutocastGuard next(bf16);
  EXPECT_EQ(autocast_stats().casts, 0);
  linear(x, w);
  EXPECT_EQ(autocast_stats().casts, 2);
  EXPECT_EQ(autocast_stats().cache_hits, 0);
}

TEST(Autocast, SeveralBackwardsInOneRegionEachReachTheWeight) {
  Tensor w = randn({8, 16}, f32, 22).set_requires_grad();
  Tensor w2 = w.detach().clone().set_requires_grad();
  const Tensor x1 = randn({2, 16}, bf16, 23), x2 = randn({2, 16}, bf16, 24);
  {
    AutocastGuard guard(bf16);  // two micro-batches accumulate into w.grad
    sum(linear(x1, w)).backward();
    sum(linear(x2, w)).backward();
    EXPECT_EQ(autocast_stats().cache_hits, 0);  // the first cast's node was freed
  }
  sum(linear(x1, w2.to(bf16)).to(f32)).backward();
  sum(linear(x2, w2.to(bf16)).to(f32)).backward();
  EXPECT_TRUE(same_bits(w.grad(), w2.grad()));
}

TEST(Autocast, CachedCastsWithoutHistoryNeverServeGradMode) {
  Tensor w = randn({8, 16}, f32, 9).set_requires_grad();
  const Tensor x = randn({2, 16}, bf16, 10);
  AutocastGuard guard(bf16);
  {
    NoGradGuard no_grad;
    EXPECT_FALSE(linear(x, w).requires_grad());
  }
  const Tensor y = linear(x, w);
  EXPECT_TRUE(y.requires_grad());
  EXPECT_EQ(autocast_stats().casts, 2);  // one per grad mode
  sum(y).backward();
  EXPECT_TRUE(w.grad().defined());
}

TEST(Autocast, CacheCanBeTurnedOff) {
  Tensor w = randn({8, 16}, f32, 11).set_requires_grad();
  const Tensor x = randn({2, 16}, bf16, 12);
  AutocastGuard guard(bf16, AutocastOptions{.cache_casts = false});
  linear(x, w);
  linear(x, w);
  EXPECT_EQ(autocast_stats().casts, 2);
  EXPECT_EQ(autocast_stats().cache_hits, 0);
}

TEST(Autocast, PerOpOverrides) {
  const Tensor x = randn({4, 8}, bf16, 13), w = randn({3, 8}, bf16, 14);
  const Tensor xf = randn({4, 8}, f32, 15);
  AutocastGuard guard(bf16, {.fp32_ops = {"linear"}, .lower_precision_ops = {"softmax"}});
  const Tensor y = linear(x, w);
  EXPECT_EQ(y.dtype(), f32);
  EXPECT_TRUE(same_bits(y, linear(x.to(f32), w.to(f32))));
  const Tensor p = softmax(xf);
  EXPECT_EQ(p.dtype(), bf16);
  EXPECT_TRUE(same_bits(p, softmax(xf.to(bf16))));
  EXPECT_EQ(effective_category("linear"), CastCategory::fp32);
  EXPECT_EQ(effective_category("matmul"), CastCategory::lower_precision);
  {
    // An inner guard adds to the outer options; its own per-op choice wins for that op.
    AutocastGuard inner(bf16, {.fp32_ops = {"gelu"}, .lower_precision_ops = {"linear"}});
    EXPECT_EQ(gelu(x).dtype(), f32);
    EXPECT_EQ(linear(x, w).dtype(), bf16);
    EXPECT_EQ(softmax(xf).dtype(), bf16);
  }
  EXPECT_EQ(gelu(x).dtype(), bf16);
  EXPECT_EQ(linear(x, w).dtype(), f32);
}

TEST(Autocast, BadOverridesNameTheOp) {
  std::string m = error_of([] { AutocastGuard g(bf16, {.fp32_ops = {"softmaxx"}}); });
  EXPECT_NE(m.find("'softmaxx'"), std::string::npos) << m;
  EXPECT_NE(m.find("log_softmax"), std::string::npos) << m;  // lists the table's ops
  m = error_of(
      [] { AutocastGuard g(bf16, {.fp32_ops = {"linear"}, .lower_precision_ops = {"linear"}}); });
  EXPECT_NE(m.find("'linear' is in both"), std::string::npos) << m;
  EXPECT_NE(error_of([] { AutocastGuard g(bf16, {.fp32_modules = {""}}); }), "");
  EXPECT_FALSE(autocast_enabled());
}

TEST(Autocast, ModuleScopesBuildADottedPath) {
  EXPECT_EQ(module_path(), "");
  {
    ModuleScope blocks("blocks.0");
    {
      ModuleScope moe("moe");
      ModuleScope router("router");
      EXPECT_EQ(module_path(), "blocks.0.moe.router");
    }
    EXPECT_EQ(module_path(), "blocks.0");
  }
  EXPECT_EQ(module_path(), "");
}

TEST(Autocast, Fp32ModulesKeepEveryOpInsideInF32) {
  const Tensor x = randn({4, 8}, bf16, 16), w = randn({3, 8}, f32, 17);
  AutocastGuard guard(bf16, {.fp32_modules = {"*.router"}, .lower_precision_ops = {"softmax"}});
  ModuleScope block("blocks.0");
  {
    ModuleScope attn("attn");
    EXPECT_EQ(linear(x, w).dtype(), bf16);
    EXPECT_EQ(effective_category("linear"), CastCategory::lower_precision);
  }
  {
    ModuleScope moe("moe");
    ModuleScope router("router");
    const Tensor y = linear(x, w);  // both operands f32: a bf16 activation is widened
    EXPECT_EQ(y.dtype(), f32);
    EXPECT_TRUE(same_bits(y, linear(x.to(f32), w)));
    EXPECT_EQ(softmax(y).dtype(), f32);  // the module beats the op override
    EXPECT_EQ(gelu(x).dtype(), f32);     // as_given ops too
    EXPECT_EQ(add(x, x).dtype(), f32);   // and promote ops
    ModuleScope proj("proj");            // a scope below the router is inside it
    EXPECT_EQ(linear(x, w).dtype(), f32);
    EXPECT_EQ(effective_category("scaled_dot_product_attention"), CastCategory::fp32);
  }
  ModuleScope routers("routers");  // "blocks.0.routers" is not "*.router"
  EXPECT_EQ(linear(x, w).dtype(), bf16);
}

TEST(Autocast, ModuleGlobsMatchWholeScopes) {
  const Tensor x = randn({4, 8}, f32, 18), w = randn({3, 8}, f32, 19);
  AutocastGuard guard(bf16, {.fp32_modules = {"blocks.1", "lm_?ead"}});
  const auto dtype_in = [&](std::initializer_list<const char*> path) {
    std::vector<std::unique_ptr<ModuleScope>> scopes;
    for (const char* s : path) scopes.push_back(std::make_unique<ModuleScope>(s));
    const DType d = linear(x, w).dtype();
    while (!scopes.empty()) scopes.pop_back();  // innermost first, as scopes nest
    return d;
  };
  EXPECT_EQ(dtype_in({"blocks.1", "mlp"}), f32);
  EXPECT_EQ(dtype_in({"blocks.10", "mlp"}), bf16);
  EXPECT_EQ(dtype_in({"blocks.11"}), bf16);
  EXPECT_EQ(dtype_in({"lm_head"}), f32);
  EXPECT_EQ(dtype_in({"lm_heads"}), bf16);
  EXPECT_EQ(dtype_in({"model", "blocks.1"}), bf16);  // globs see the whole path
  EXPECT_EQ(dtype_in({}), bf16);                     // outside every scope
}

TEST(Autocast, SameBitsOnOneAndTwoThreads) {
  const Tensor x = randn({64, 96}, f32, 20), w = randn({48, 96}, f32, 21);
  AutocastGuard guard(bf16);
  const Tensor one = with_threads(1, [&] { return softmax(linear(x, w)); });
  const Tensor two = with_threads(2, [&] { return softmax(linear(x, w)); });
  EXPECT_TRUE(same_bits(one, two));
}

}  // namespace
}  // namespace mixprec::amp
