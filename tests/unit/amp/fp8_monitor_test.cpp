// The FP8 collection (amp/fp8_monitor.h): `linear` under a recipe files its six FP8 operands
// under "<module> <product>.<operand>" in execution order, a name cast twice is merged, the
// first tensor whose source held inf/NaN is the first in execution order (not by name, not by
// linear), casts racing on threads are ordered the same way every time, and nothing is
// collected without a collection.
#include "mixprec/amp/fp8_monitor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "mixprec/amp/autocast.h"
#include "mixprec/amp/linear_recipe.h"
#include "mixprec/backend/backend.h"
#include "mixprec/ops.h"
#include "support/op_testing.h"

namespace mixprec::amp {
namespace {

using mixprec::testing::randn;

std::vector<std::string> names(const Fp8StepStats& s) {
  std::vector<std::string> out;
  for (const Fp8TensorRecord& t : s.tensors) out.push_back(t.name);
  return out;
}

float amax_of(const Tensor& t) {
  const Tensor f = t.detach().to(DType::f32).contiguous();
  float m = 0;
  for (int64_t i = 0; i < f.numel(); ++i) m = std::max(m, std::fabs(f.data<float>()[i]));
  return m;
}

const Fp8TensorRecord& find(const Fp8StepStats& s, const std::string& name) {
  for (const Fp8TensorRecord& t : s.tensors)
    if (t.name == name) return t;
  throw std::runtime_error("no FP8 tensor " + name);
}

// Two linears "blk.a" then "blk.b" (x [32, 64] -> 48 -> 32) under tensorwise, forward and
// backward; `poison` edits the operands first.
struct TwoLinears {
  Tensor x = randn({32, 64}, DType::f32, 1).set_requires_grad();
  Tensor wa = randn({48, 64}, DType::f32, 2, 0.1).set_requires_grad();
  Tensor wb = randn({32, 48}, DType::f32, 3, 0.1).set_requires_grad();
  Tensor between;  // added to a's output before b (undefined: nothing)
  Tensor dy = randn({32, 32}, DType::f32, 4);

  void run() {
    Tensor y;
    {
      AutocastGuard guard(DType::bf16,
                          {.linear_recipe = &find_linear_recipe("float8", "tensorwise", "t")});
      ModuleScope blk("blk");
      Tensor h;
      {
        ModuleScope a("a");
        h = linear(x, wa);
      }
      if (between.defined()) h = add(h, between);
      ModuleScope b("b");
      y = linear(h, wb);
    }
    y.backward(dy);
  }
};

TEST(Fp8Monitor, NamesEveryOperandInExecutionOrder) {
  Fp8Collection collection;
  TwoLinears{}.run();
  const Fp8StepStats s = collection.stats();
  const std::vector<std::string> expected = {
      "blk.a fwd.input",         "blk.a fwd.weight",        "blk.b fwd.input",
      "blk.b fwd.weight",        "blk.b dgrad.grad_output", "blk.b dgrad.weight",
      "blk.b wgrad.grad_output", "blk.b wgrad.input",       "blk.a dgrad.grad_output",
      "blk.a dgrad.weight",      "blk.a wgrad.grad_output", "blk.a wgrad.input"};
  EXPECT_EQ(names(s), expected);
  EXPECT_EQ(find(s, "blk.a fwd.input").stats.numel, 32 * 64);
  EXPECT_EQ(find(s, "blk.a fwd.weight").stats.numel, 48 * 64);
  EXPECT_EQ(find(s, "blk.a dgrad.grad_output").spec, "f8_e5m2 allxall torchao");
  // The operand as the linear saw it: bf16.
  EXPECT_EQ(find(s, "blk.a fwd.input").stats.amax, amax_of(TwoLinears{}.x.to(DType::bf16)));
  EXPECT_EQ(s.first_nonfinite, -1);
  EXPECT_EQ(s.total().nonfinite, 0);
  // a: X [32, 64], W [48, 64], dY [32, 48], Wᵀ [64, 48], dYᵀ [48, 32], Xᵀ [64, 32]; b likewise.
  EXPECT_EQ(s.total().numel, 13312 + 8192);
}

// An inf in the second linear's weight: its fwd.weight is the first overflow, though the first
// linear's dgrad.grad_output (dY·W through the flushed weight: NaN) sorts before it by name and
// by linear.
TEST(Fp8Monitor, TheFirstNonFiniteSourceIsTheFirstInExecutionOrder) {
  Fp8Collection collection;
  TwoLinears t;
  {
    const NoGradGuard no_grad;
    Tensor w = Tensor::zeros({32, 48});
    w.data<float>()[5] = INFINITY;
    t.wb = add(t.wb.detach(), w).set_requires_grad();
  }
  t.run();
  const Fp8StepStats s = collection.stats();
  ASSERT_GE(s.first_nonfinite, 0);
  EXPECT_EQ(s.tensors[static_cast<std::size_t>(s.first_nonfinite)].name, "blk.b fwd.weight");
  EXPECT_EQ(find(s, "blk.b fwd.weight").stats.nonfinite, 1);
  EXPECT_GT(find(s, "blk.a dgrad.grad_output").stats.nonfinite, 0) << "the test shows nothing";
  EXPECT_EQ(find(s, "blk.a fwd.input").stats.nonfinite, 0);
}

// Two micro-batches in one collection: a NaN gradient reaching b's backward in the first comes
// before an inf weight in the second's forward, though forward casts come first within one.
TEST(Fp8Monitor, AnEarlierMicroBatchsBackwardComesBeforeALaterForward) {
  Fp8Collection collection;
  TwoLinears first;
  first.dy.data<float>()[7] = NAN;
  first.run();
  TwoLinears second;
  {
    const NoGradGuard no_grad;
    Tensor w = Tensor::zeros({32, 48});
    w.data<float>()[5] = INFINITY;
    second.wb = add(second.wb.detach(), w).set_requires_grad();
  }
  second.run();
  const Fp8StepStats s = collection.stats();
  ASSERT_GE(s.first_nonfinite, 0);
  EXPECT_EQ(s.tensors[static_cast<std::size_t>(s.first_nonfinite)].name, "blk.b dgrad.grad_output");
  EXPECT_GT(find(s, "blk.b fwd.weight").stats.nonfinite, 0) << "the test shows nothing";
}

// An inf in a linear's input: named as that linear's fwd.input.
TEST(Fp8Monitor, AnInfInALinearsInputNamesItsFwdInput) {
  Fp8Collection collection;
  TwoLinears t;
  t.between = Tensor::zeros({32, 48});
  t.between.data<float>()[100] = -INFINITY;
  t.run();
  const Fp8StepStats s = collection.stats();
  ASSERT_GE(s.first_nonfinite, 0);
  const Fp8TensorRecord& first = s.tensors[static_cast<std::size_t>(s.first_nonfinite)];
  EXPECT_EQ(first.name, "blk.b fwd.input");
  EXPECT_EQ(first.stats.nonfinite, 1);
  // torchao's scale for an inf amax is 0: every other element is flushed.
  EXPECT_EQ(first.stats.scale_max, 0.0f);
  EXPECT_EQ(first.stats.flushed, 32 * 48 - 1);
  const std::string d = describe_fp8_tensor(first);
  EXPECT_NE(d.find("1 of 1536 elements inf or NaN"), std::string::npos) << d;
}

// A linear run twice in one collection (micro-batches, a recompute): one entry per name.
TEST(Fp8Monitor, ANameCastTwiceIsMerged) {
  Fp8Collection collection;
  TwoLinears t;
  t.run();
  const Fp8StepStats once = collection.stats();
  t.x = mul(t.x.detach(), Tensor::full({32, 64}, 4.0)).set_requires_grad();
  t.run();
  const Fp8StepStats twice = collection.stats();
  EXPECT_EQ(names(twice), names(once));
  const Fp8TensorRecord& in1 = find(once, "blk.a fwd.input");
  const Fp8TensorRecord& in2 = find(twice, "blk.a fwd.input");
  EXPECT_EQ(in2.stats.numel, 2 * in1.stats.numel);
  EXPECT_EQ(in2.stats.amax, 4 * in1.stats.amax);
  EXPECT_EQ(in2.stats.scale_max, in1.stats.scale_max);
  EXPECT_EQ(in2.stats.scale_min, in1.stats.scale_max / 4);
}

TEST(Fp8Monitor, NothingIsCollectedWithoutACollection) {
  EXPECT_FALSE(fp8_collecting());
  EXPECT_EQ(fp8_site_here().prepared, 0);
  TwoLinears{}.run();
  // A site captured in an earlier collection, or outside any, files nothing in a later one.
  Fp8Site earlier, outside = fp8_site_here();
  {
    Fp8Collection first;
    ModuleScope scope("old");
    earlier = fp8_site_here();
    EXPECT_GT(earlier.prepared, 0);
  }
  const Tensor x = randn({4, 32}, DType::bf16, 3);
  const backend::Quantized q =
      backend::current().quantize(x, {.element = DType::f8_e4m3fn, .block = {0, 0}});
  {
    Fp8Collection collection;
    EXPECT_TRUE(fp8_collecting());
    record_fp8_operand(earlier, Fp8Product::fwd, 0, x, q);
    record_fp8_operand(outside, Fp8Product::fwd, 0, x, q);
    EXPECT_TRUE(collection.stats().tensors.empty());
    record_fp8_operand(fp8_site_here(), Fp8Product::fwd, 0, x, q);  // a site of this one
    EXPECT_EQ(collection.stats().tensors.size(), 1u);
    const std::string e = mixprec::testing::error_of([] { Fp8Collection another; });
    EXPECT_NE(e.find("already running"), std::string::npos) << e;
  }
  EXPECT_FALSE(fp8_collecting());
}

// Backward casts of many linears racing on threads (grouped_linear's spread): listed in the
// engine's order, the newest linear first, however the threads ran.
TEST(Fp8Monitor, CastsRacingOnThreadsAreOrderedTheSameEveryTime) {
  const Tensor x = randn({16, 32}, DType::bf16, 9);
  const backend::QuantSpec spec{};
  const backend::Quantized q = backend::current().quantize(x, spec);
  for (int round = 0; round < 5; ++round) {
    Fp8Collection collection;
    std::vector<Fp8Site> sites;
    for (int g = 0; g < 8; ++g) {
      ModuleScope scope("experts." + std::to_string(g));
      sites.push_back(fp8_site_here());
    }
    std::vector<std::thread> threads;
    for (int g = 0; g < 8; ++g)
      threads.emplace_back([&, g] {
        const Fp8Site& site = sites[static_cast<std::size_t>((g * 3 + round) % 8)];
        record_fp8_operand(site, Fp8Product::wgrad, 1, x, q);
        record_fp8_operand(site, Fp8Product::dgrad, 0, x, q);
      });
    for (std::thread& t : threads) t.join();
    const std::vector<std::string> got = names(collection.stats());
    ASSERT_EQ(got.size(), 16u);
    for (int g = 0; g < 8; ++g) {
      const std::string m = "experts." + std::to_string(7 - g);
      EXPECT_EQ(got[static_cast<std::size_t>(2 * g)], m + " dgrad.grad_output") << round;
      EXPECT_EQ(got[static_cast<std::size_t>(2 * g + 1)], m + " wgrad.input") << round;
    }
  }
}

}  // namespace
}  // namespace mixprec::amp
