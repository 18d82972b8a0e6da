// Transformer Engine's delayed scaling (amp/delayed_scaling.h): the scale follows TE's rule
// from the amax history (window, max / most_recent, margin, amaxes that keep the scale), the
// state survives a checkpoint bit for bit and refuses a damaged one whole, and a linear under
// te_delayed casts each operand with the scale of the steps before.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <string>
#include <vector>

#include "mixprec/amp/autocast.h"
#include "mixprec/amp/delayed_scaling.h"
#include "mixprec/amp/linear_recipe.h"
#include "mixprec/autograd/grad_mode.h"
#include "mixprec/numerics/convert.h"
#include "mixprec/ops.h"
#include "support/op_testing.h"

namespace mixprec::amp {
namespace {

using mixprec::testing::error_of;
using mixprec::testing::randn;

// One step of a tensor whose amax is `amax`: the scale it was cast with, then the update.
float step(DelayedScaling& d, float amax, const std::string& key = "t", float max = 448) {
  const float s = d.scale(key, max);
  d.record(key, amax);
  d.update();
  return s;
}

TEST(DelayedScaling, ScalesFollowTheWindowOfTheHistory) {
  DelayedScaling d({.amax_history_len = 3});
  EXPECT_EQ(step(d, 2), 1.0f);           // TE's initial scale
  EXPECT_EQ(step(d, 8), 224.0f);         // 448 / 2
  EXPECT_EQ(step(d, 1), 56.0f);          // 448 / max(2, 8)
  EXPECT_EQ(step(d, 1), 56.0f);          // 8 still in the window of 3
  EXPECT_EQ(step(d, 1), 56.0f);          // max(8, 1, 1)
  EXPECT_EQ(d.scale("t", 448), 448.0f);  // 8 has left: max(1, 1, 1)
}

TEST(DelayedScaling, MostRecentMarginAndAmaxesThatKeepTheScale) {
  DelayedScaling recent({.amax_history_len = 4, .amax_compute_algo = AmaxAlgo::most_recent});
  step(recent, 8);
  step(recent, 2);
  EXPECT_EQ(recent.scale("t", 448), 224.0f);
  DelayedScaling margin({.amax_history_len = 1, .margin = 2});
  step(margin, 2);
  EXPECT_EQ(margin.scale("t", 448), 56.0f);  // 448 / 2 / 2^2
  DelayedScaling keep({.amax_history_len = 1});
  step(keep, 4);
  for (float a : {0.0f, INFINITY, NAN}) {
    step(keep, a);
    EXPECT_EQ(keep.scale("t", 448), 112.0f) << a;  // 0, inf and NaN keep the last scale
  }
  step(keep, 1e-44f);  // 448 / 1e-44 overflows f32
  EXPECT_EQ(keep.scale("t", 448), FLT_MAX);
  DelayedScaling e5m2({.amax_history_len = 1});
  step(e5m2, 4, "g", 57344);
  EXPECT_EQ(e5m2.scale("g", 57344), 14336.0f);
}

TEST(DelayedScaling, CheckpointRoundTripsAndADamagedOneChangesNothing) {
  DelayedScaling d({.amax_history_len = 4});
  step(d, 3, "a.input");
  step(d, 5, "a.grad_output", 57344);
  step(d, 7, "a.input");
  const TensorMap saved = d.checkpoint_dict();
  ASSERT_EQ(saved.size(), 6u);
  DelayedScaling back({.amax_history_len = 4});
  back.load_checkpoint_dict(saved);
  EXPECT_EQ(back.scale("a.input", 448), d.scale("a.input", 448));
  for (int i = 0; i < 5; ++i)  // and the histories go on as the original's
    EXPECT_EQ(step(back, 1, "a.input"), step(d, 1, "a.input")) << i;

  const auto damaged = [&](const std::string& name, std::vector<float> v) {
    TensorMap m = saved;
    m[name] = Tensor::from_doubles(std::vector<double>(v.begin(), v.end()),
                                   {static_cast<int64_t>(v.size())}, DType::f32);
    DelayedScaling target({.amax_history_len = 4});
    target.scale("kept", 448);
    const std::string message = error_of([&] { target.load_checkpoint_dict(m); });
    EXPECT_EQ(target.keys(), std::vector<std::string>{"kept"}) << name;  // unchanged
    return message;
  };
  EXPECT_NE(damaged("a.input.amax_history", {1, 2})
                .find("'a.input.amax_history' holds 2 amaxes, this run's amax_history_len is 4"),
            std::string::npos);
  EXPECT_NE(damaged("a.input.amax_history", {1, -2, 0, 0}).find("negative amax"),
            std::string::npos);
  EXPECT_NE(damaged("a.input.scale", {0}).find("not a positive finite scale"), std::string::npos);
  EXPECT_NE(damaged("a.input.fp8_max", {100}).find("neither E4M3's 448"), std::string::npos);
  EXPECT_NE(damaged("a.weight.fp8_max", {448}).find("no entry 'a.weight.amax_history'"),
            std::string::npos);
  EXPECT_NE(damaged("a.input.bogus", {1}).find("entry 'a.input.bogus' is none of"),
            std::string::npos);
}

// E4M3 bits of x·scale, saturated and rounded to nearest even, by the conversion kernels.
std::vector<uint8_t> cast_by_hand(const Tensor& x, float scale) {
  const Tensor f = x.to(DType::f32).contiguous();
  std::vector<float> y(f.data<float>(), f.data<float>() + f.numel());
  for (float& v : y) v *= scale;
  std::vector<uint8_t> q(y.size());
  ConvertOptions saturating;
  saturating.saturate = true;
  convert_from_f32(y.data(), DType::f8_e4m3fn, q.data(), y.size(), saturating);
  return q;
}

float amax_of(const Tensor& t) {  // of t's values in f32
  const Tensor f = t.detach().to(DType::f32).contiguous();
  float m = 0;
  for (int64_t i = 0; i < f.numel(); ++i) m = std::max(m, std::fabs(f.data<float>()[i]));
  return m;
}

std::vector<uint8_t> bytes(const Tensor& t) {
  const auto* p = static_cast<const uint8_t*>(t.raw_data());
  return {p, p + t.numel()};
}

TEST(DelayedScaling, QuantizeCastsWithTheScaleOfTheStepsBefore) {
  DelayedScaling d({.amax_history_len = 2});
  const backend::QuantSpec spec{DType::f8_e4m3fn, {0, 0}, ScaleRule::te, false};
  const Tensor x = randn({8, 32}, DType::bf16, 1, 3.0);
  const backend::Quantized first = delayed_quantize(x, spec, d, "k", true);
  EXPECT_EQ(first.scales.data<float>()[0], 1.0f);
  EXPECT_EQ(bytes(first.data), cast_by_hand(x, 1.0f));
  d.update();
  const float amax = amax_of(x);
  const float expected = 448.0f / amax;
  const backend::Quantized second = delayed_quantize(scale(x, 1.5), spec, d, "k", true);
  EXPECT_EQ(second.scales.data<float>()[0], expected);
  EXPECT_EQ(bytes(second.data), cast_by_hand(scale(x, 1.5), expected));  // 1.5x saturates
  delayed_quantize(scale(x, 100.0), spec, d, "k", false);  // evaluation's: records nothing
  d.update();
  EXPECT_EQ(d.scale("k", 448), 448.0f / (1.5f * amax));
}

TEST(DelayedScaling, ALinearUnderTeDelayedKeysItsOperandsByModuleAndRole) {
  const LinearRecipe* r = find_any_linear_recipe("te_delayed");
  ASSERT_NE(r, nullptr);
  ASSERT_TRUE(r->delayed);
  DelayedScaling d({.amax_history_len = 8});
  Tensor x = randn({32, 64}, DType::f32, 2).set_requires_grad();
  Tensor w = randn({48, 64}, DType::f32, 3, 0.1).set_requires_grad();
  const Tensor dy = randn({32, 48}, DType::bf16, 4, 0.01);
  Tensor y;
  {
    AutocastGuard guard(DType::bf16, {.linear_recipe = r, .delayed_scaling = &d});
    ModuleScope scope("fc");
    y = linear(x, w);
  }
  y.backward(dy);
  {
    NoGradGuard no_grad;  // an evaluation forward reads the scales and records nothing
    AutocastGuard guard(DType::bf16, {.linear_recipe = r, .delayed_scaling = &d});
    ModuleScope scope("fc");
    linear(scale(x.detach(), 100.0), w);
  }
  EXPECT_EQ(d.keys(), (std::vector<std::string>{"fc.grad_output", "fc.input", "fc.weight"}));
  d.update();
  EXPECT_EQ(d.scale("fc.input", 448), 448.0f / amax_of(x.to(DType::bf16)));
  EXPECT_EQ(d.scale("fc.weight", 448), 448.0f / amax_of(w.to(DType::bf16)));
  EXPECT_EQ(d.scale("fc.grad_output", 57344), 57344.0f / amax_of(dy));
  // Without a state the recipe cannot cast.
  const std::string m = error_of([&] {
    AutocastGuard guard(DType::bf16, {.linear_recipe = r});
    linear(x, w);
  });
  EXPECT_NE(m.find("te_delayed casts with amax histories"), std::string::npos) << m;
}

}  // namespace
}  // namespace mixprec::amp
