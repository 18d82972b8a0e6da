// GradScaler against PyTorch's documented semantics (torch.amp.GradScaler and
// _amp_update_scale_, restated in ../shared/docs/numerics.md): scale trajectories over
// patterns of finite / non-finite steps, the per-iteration call order, skipped steps, state
// round trips, gradients of every dtype, and the options others have (hysteresis, bounds).
#include "mixprec/amp/grad_scaler.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "mixprec/ops.h"
#include "mixprec/optim/adamw.h"
#include "mixprec/optim/clip.h"
#include "support/op_testing.h"

namespace mixprec::amp {
namespace {

using optim::Optimizer;
using optim::Parameter;
using optim::ParamList;

// Plain SGD without state that records what the scaler asked of it.
class RecordingSgd final : public Optimizer {
 public:
  explicit RecordingSgd(ParamList params, double lr = 0.5)
      : Optimizer({optim::ParamGroup{std::move(params), lr, 0.0}}) {}
  void step(float inv_scale) override {
    ++calls;
    last_inv_scale = inv_scale;
    NoGradGuard no_grad;
    for (const auto& p : parameters()) {
      const Tensor g = p->grad();
      if (!g.defined()) continue;
      const std::vector<double> gv = g.to_doubles();
      std::vector<double> mv = p->master().to_doubles();
      for (size_t i = 0; i < mv.size(); ++i)
        mv[i] -= groups_[0].lr * static_cast<double>(static_cast<float>(gv[i]) * inv_scale);
      p->master().copy_from(Tensor::from_doubles(mv, p->master().shape(), DType::f64));
      p->refresh();
    }
    ++steps_;
  }
  std::size_t state_bytes() const override { return 0; }
  optim::StateDict state_dict() const override { return {}; }
  void load_state_dict(const optim::StateDict&) override {}
  int calls = 0;
  float last_inv_scale = 0;
};

std::shared_ptr<Parameter> param(const std::string& name, int64_t n, DType grad_dtype,
                                 double grad_value) {
  MixedPrecisionPolicy policy;
  policy.reduce_dtype = grad_dtype;
  auto p = std::make_shared<Parameter>(name, Tensor::full({n}, 1.0), policy);
  p->set_grad(Tensor::full({n}, grad_value, grad_dtype));
  return p;
}

// One iteration: gradients finite or not, then step and update; returns the report.
StepReport iterate(GradScaler& scaler, RecordingSgd& opt, bool finite) {
  for (const auto& p : opt.parameters())
    p->set_grad(Tensor::full(p->master().shape(), finite ? 1.0 : INFINITY, p->grad().dtype()));
  const StepReport r = scaler.step(opt);
  scaler.update();
  return r;
}

// The reference rule, written from the documentation: backoff on inf (tracker reset); grow
// by the factor after `interval` consecutive finite steps if the f32 result is finite.
struct ReferenceScaler {
  float scale;
  int64_t tracker = 0;
  int64_t interval;
  void update(bool found_inf) {
    if (found_inf) {
      scale = static_cast<float>(scale * 0.5);
      tracker = 0;
    } else if (++tracker == interval) {
      const auto grown = static_cast<float>(scale * 2.0);
      if (std::isfinite(grown)) scale = grown;
      tracker = 0;
    }
  }
};

TEST(GradScaler, DefaultsArePyTorchs) {
  const ScalerOptions o = ScalerOptions::dynamic_defaults();
  EXPECT_EQ(o.init_scale, 65536.0);
  EXPECT_EQ(o.growth_factor, 2.0);
  EXPECT_EQ(o.backoff_factor, 0.5);
  EXPECT_EQ(o.growth_interval, 2000);
  EXPECT_EQ(GradScaler().get_scale(), 65536.0f);
}

TEST(GradScaler, TrajectoryFollowsTheReferenceRuleOverPatterns) {
  // Patterns of finite (1) and non-finite (0) steps, including growth exactly at the interval,
  // an overflow one step before it (tracker reset), and runs of overflows.
  const std::vector<std::string> patterns = {"1111111111", "1110111011101110", "0000011111111",
                                             "1101101101101111111", "0111011101110111"};
  for (int64_t interval : {1, 3, 4}) {
    for (const std::string& pattern : patterns) {
      ScalerOptions o;
      o.growth_interval = interval;
      o.init_scale = 1024;
      GradScaler scaler(o);
      RecordingSgd opt({param("w", 4, DType::f32, 1.0)});
      ReferenceScaler ref{1024.0f, 0, interval};
      for (size_t i = 0; i < pattern.size(); ++i) {
        const bool finite = pattern[i] == '1';
        const StepReport r = iterate(scaler, opt, finite);
        ref.update(!finite);
        EXPECT_EQ(r.stepped, finite);
        ASSERT_EQ(scaler.get_scale(), ref.scale)
            << "interval " << interval << " pattern " << pattern << " step " << i;
        ASSERT_EQ(scaler.state().growth_tracker, ref.tracker);
      }
    }
  }
}

TEST(GradScaler, NeverGrowsPastFltMax) {
  ScalerOptions o;
  o.init_scale = std::ldexp(1.0, 126);
  o.growth_interval = 1;
  GradScaler scaler(o);
  RecordingSgd opt({param("w", 2, DType::f32, 1.0)});
  iterate(scaler, opt, true);
  EXPECT_EQ(scaler.get_scale(), std::ldexp(1.0f, 127));
  iterate(scaler, opt, true);  // 2^128 is inf in f32: kept at 2^127, tracker reset
  EXPECT_EQ(scaler.get_scale(), std::ldexp(1.0f, 127));
  EXPECT_EQ(scaler.state().growth_tracker, 0);
}

TEST(GradScaler, HysteresisToleratesOverflowsBeforeBackingOff) {
  ScalerOptions o;
  o.init_scale = 256;
  o.hysteresis = 3;
  o.growth_interval = 2;
  GradScaler scaler(o);
  RecordingSgd opt({param("w", 2, DType::f32, 1.0)});
  for (int i = 0; i < 2; ++i) EXPECT_FALSE(iterate(scaler, opt, false).stepped);
  EXPECT_EQ(scaler.get_scale(), 256.0f);  // two overflows tolerated (steps still skipped)
  EXPECT_FALSE(iterate(scaler, opt, false).stepped);
  EXPECT_EQ(scaler.get_scale(), 128.0f);  // the third backs off and restores the allowance
  EXPECT_EQ(scaler.state().hysteresis_left, 3);
  iterate(scaler, opt, false);
  EXPECT_EQ(scaler.state().hysteresis_left, 2);
  iterate(scaler, opt, true);
  iterate(scaler, opt, true);  // growth restores the allowance
  EXPECT_EQ(scaler.get_scale(), 256.0f);
  EXPECT_EQ(scaler.state().hysteresis_left, 3);
}

TEST(GradScaler, MinAndMaxScaleBoundTheTrajectory) {
  ScalerOptions o;
  o.init_scale = 4;
  o.min_scale = 1;
  o.max_scale = 8;
  o.growth_interval = 1;
  GradScaler scaler(o);
  RecordingSgd opt({param("w", 2, DType::f32, 1.0)});
  for (int i = 0; i < 5; ++i) iterate(scaler, opt, false);
  EXPECT_EQ(scaler.get_scale(), 1.0f);
  for (int i = 0; i < 5; ++i) iterate(scaler, opt, true);
  EXPECT_EQ(scaler.get_scale(), 8.0f);
}

TEST(GradScaler, CallOrderErrors) {
  GradScaler scaler;
  RecordingSgd opt({param("w", 3, DType::f32, 2.0)});
  EXPECT_THROW(scaler.update(), Error);  // nothing recorded yet
  scaler.unscale(opt);
  EXPECT_THROW(scaler.unscale(opt), Error);  // twice before update()
  scaler.step(opt);
  EXPECT_THROW(scaler.step(opt), Error);     // twice before update()
  EXPECT_THROW(scaler.unscale(opt), Error);  // after step()
  scaler.update();
  scaler.unscale(opt);  // a new iteration
  RecordingSgd empty({param("v", 3, DType::f32, 1.0)});
  empty.zero_grad();
  EXPECT_THROW(scaler.step(empty), Error);  // no gradient anywhere
}

TEST(GradScaler, UnscaleMultipliesByTheF32InverseOfTheScaleAndStepUsesIt) {
  ScalerOptions o;
  o.init_scale = 3.0;  // 1/3 is not a power of two: the f64 -> f32 rounding of 1/scale shows
  GradScaler scaler(o);
  RecordingSgd opt({param("w", 5, DType::f32, 0.7)});
  const auto inv = static_cast<float>(1.0 / 3.0);
  scaler.unscale(opt);
  EXPECT_EQ(opt.parameters()[0]->grad().to_doubles()[0], static_cast<double>(0.7f * inv));
  scaler.step(opt);
  EXPECT_EQ(opt.last_inv_scale, 1.0f);  // already unscaled
  scaler.update();
  // Without unscale(), 1/scale is folded into the optimizer's own pass.
  scaler.step(opt);
  EXPECT_EQ(opt.last_inv_scale, inv);
  scaler.update();
}

TEST(GradScaler, ScaleMultipliesTheLossAndKeepsItsGraph) {
  ScalerOptions o;
  o.init_scale = 1024;
  GradScaler scaler(o);
  Tensor x = Tensor::full({3}, 0.5).set_requires_grad(true);
  Tensor loss = sum(mul(x, x));
  Tensor scaled = scaler.scale(loss);
  EXPECT_EQ(scaled.to_doubles()[0], 0.75 * 1024);
  scaled.backward();
  EXPECT_EQ(x.grad().to_doubles()[0], 1024.0);  // d(x^2)/dx = 1, times the scale
  EXPECT_TRUE(testing::same_bits(GradScaler(ScalerOptions::none()).scale(loss), loss));
}

TEST(GradScaler, SkippedStepLeavesParametersUntouchedAndSaysWhy) {
  GradScaler scaler;
  ParamList params;
  for (int i = 0; i < 50; ++i)
    params.push_back(param("layer" + std::to_string(i), 64, DType::f32, 1.0));
  RecordingSgd opt(params);
  // One inf in one element of one of many tensors.
  Tensor g = params[37]->grad().clone();
  std::vector<double> v = g.to_doubles();
  v[41] = INFINITY;
  params[37]->set_grad(Tensor::from_doubles(v, g.shape(), DType::f32));
  std::vector<std::vector<double>> before;
  for (const auto& p : params) before.push_back(p->master().to_doubles());
  const StepReport r = scaler.step(opt);
  EXPECT_FALSE(r.stepped);
  EXPECT_EQ(r.first_nonfinite, "layer37");
  EXPECT_NE(r.reason.find("layer37"), std::string::npos) << r.reason;
  EXPECT_NE(r.reason.find("65536"), std::string::npos) << r.reason;
  EXPECT_EQ(opt.calls, 0);
  for (size_t i = 0; i < params.size(); ++i) EXPECT_EQ(params[i]->master().to_doubles(), before[i]);
  scaler.update();
  EXPECT_EQ(scaler.get_scale(), 32768.0f);
  EXPECT_EQ(scaler.state().steps_skipped, 1);
  // The same through unscale(): every element unscaled, the inf still found.
  scaler.unscale(opt);
  EXPECT_FALSE(scaler.step(opt).stepped);
  scaler.update();
}

TEST(GradScaler, SkippedStepLeavesAdamWMastersAndStateBitIdentical) {
  MixedPrecisionPolicy bf16_mixed;
  bf16_mixed.param_dtype = bf16_mixed.compute_dtype = DType::bf16;
  ParamList params;
  for (int i = 0; i < 3; ++i)
    params.push_back(std::make_shared<Parameter>(std::string("p").append(std::to_string(i)),
                                                 testing::randn({5, 7}, DType::f32, 10 + i),
                                                 bf16_mixed));
  optim::AdamW opt(params, 1e-2);
  GradScaler scaler;
  auto set_grads = [&](double bad) {
    for (size_t i = 0; i < params.size(); ++i) {
      std::vector<double> g = testing::randn({5, 7}, DType::f32, 20 + i).to_doubles();
      for (double& v : g) v *= 65536;
      if (i == 1) g[3] = bad;
      params[i]->set_grad(Tensor::from_doubles(g, {5, 7}, DType::f32));
    }
  };
  for (int s = 0; s < 2; ++s) {  // real state first
    set_grads(1.0);
    ASSERT_TRUE(scaler.step(opt).stepped);
    scaler.update();
  }
  const optim::StateDict state_before = opt.state_dict();
  std::vector<Tensor> masters, working;
  for (const auto& p : params)
    masters.push_back(p->master().clone()), working.push_back(p->value().detach().clone());
  for (double bad : {double(INFINITY), double(NAN)}) {
    set_grads(bad);
    const StepReport r = scaler.step(opt);
    EXPECT_FALSE(r.stepped);
    EXPECT_EQ(r.first_nonfinite, "p1");
    scaler.update();
    for (size_t i = 0; i < params.size(); ++i) {
      EXPECT_TRUE(testing::same_bits(params[i]->master(), masters[i]));
      EXPECT_TRUE(testing::same_bits(params[i]->value(), working[i]));
    }
    const optim::StateDict state_after = opt.state_dict();
    ASSERT_EQ(state_after.size(), state_before.size());
    for (const auto& [key, t] : state_before)
      EXPECT_TRUE(testing::same_bits(state_after.at(key), t)) << key;
  }
}

TEST(GradScaler, ClippingAfterUnscaleEqualsClippingTheTrueGradients) {
  ParamList scaled, truth;
  for (int i = 0; i < 4; ++i) {
    const Tensor g = testing::randn({33}, DType::f32, 40 + i);
    scaled.push_back(param(std::string("s").append(std::to_string(i)), 33, DType::f32, 0));
    truth.push_back(param(std::string("t").append(std::to_string(i)), 33, DType::f32, 0));
    scaled.back()->set_grad(mixprec::scale(g, 4096.0));
    truth.back()->set_grad(g.clone());
  }
  RecordingSgd opt(scaled);
  ScalerOptions o;
  o.init_scale = 4096;
  GradScaler scaler(o);
  scaler.unscale(opt);
  const double n_scaled = optim::clip_grad_norm(scaled, 0.5);
  const double n_true = optim::clip_grad_norm(truth, 0.5);
  EXPECT_EQ(n_scaled, n_true);
  for (size_t i = 0; i < scaled.size(); ++i)
    EXPECT_TRUE(testing::same_bits(scaled[i]->grad(), truth[i]->grad())) << i;
}

// A clip coefficient passed to step() after unscale() gives AdamW the products of clipping
// the f32 gradients in place, bit for bit (the trainer's step).
TEST(GradScaler, AGradFactorEqualsClippingF32GradientsInPlace) {
  ScalerOptions o;
  o.init_scale = 1024;
  std::vector<std::vector<Tensor>> masters(2);
  for (int r = 0; r < 2; ++r) {
    ParamList params;
    for (int i = 0; i < 3; ++i) {
      params.push_back(std::make_shared<Parameter>(std::string("p").append(std::to_string(i)),
                                                   testing::randn({9, 4}, DType::f32, 50 + i),
                                                   MixedPrecisionPolicy{}));
      params.back()->set_grad(testing::randn({9, 4}, DType::f32, 60 + i, 3000.0));
    }
    optim::AdamW opt(params, 1e-2);
    GradScaler scaler(o);
    scaler.unscale(opt);
    const double norm = optim::grad_norm(opt.parameters());
    ASSERT_GT(norm, 1.0);  // the clip is active
    if (r == 0) {
      optim::clip_grads_to_norm(opt.parameters(), norm, 1.0);
      ASSERT_TRUE(scaler.step(opt).stepped);
    } else {
      ASSERT_TRUE(scaler.step(opt, optim::clip_coefficient(norm, 1.0)).stepped);
    }
    for (const auto& p : opt.parameters()) masters[static_cast<size_t>(r)].push_back(p->master());
  }
  for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(testing::same_bits(masters[0][i], masters[1][i])) << i;
  ParamList params{param("w", 4, DType::f32, 1.0)};
  RecordingSgd opt(params);
  GradScaler scaler;
  for (float bad : {0.0f, -1.0f, float(NAN), float(INFINITY)})
    EXPECT_NE(testing::error_of([&] { scaler.step(opt, bad); }).find("grad_factor"),
              std::string::npos);
}

TEST(GradScaler, Bf16AndF16GradientsAreUnscaledAndChecked) {
  for (DType dt : {DType::bf16, DType::f16}) {
    ScalerOptions o;
    o.init_scale = 256;
    GradScaler scaler(o);
    RecordingSgd opt({param("a", 7, dt, 96.0), param("b", 9, dt, -0.25)});
    scaler.unscale(opt);
    EXPECT_EQ(opt.parameters()[0]->grad().dtype(), dt);
    EXPECT_EQ(opt.parameters()[0]->grad().to_doubles()[3], 96.0 / 256);
    EXPECT_EQ(opt.parameters()[1]->grad().to_doubles()[8], -0.25 / 256);
    EXPECT_TRUE(scaler.step(opt).stepped);
    scaler.update();
    // A NaN in a low-precision gradient is caught.
    opt.parameters()[1]->set_grad(Tensor::full({9}, NAN, dt));
    const StepReport r = scaler.step(opt);
    EXPECT_FALSE(r.stepped) << dtype_name(dt);
    EXPECT_EQ(r.first_nonfinite, "b");
    scaler.update();
  }
}

TEST(GradScaler, DisabledScalerKeepsScaleOneButStillSkipsNonFiniteSteps) {
  GradScaler scaler(ScalerOptions::none());
  RecordingSgd opt({param("w", 4, DType::bf16, 1.0)});
  EXPECT_EQ(scaler.get_scale(), 1.0f);
  EXPECT_TRUE(iterate(scaler, opt, true).stepped);
  EXPECT_EQ(opt.last_inv_scale, 1.0f);
  EXPECT_FALSE(iterate(scaler, opt, false).stepped);  // a bf16 inf never reaches the optimizer
  EXPECT_EQ(opt.calls, 1);
  EXPECT_EQ(scaler.get_scale(), 1.0f);
  EXPECT_EQ(ScalerOptions::for_policy(MixedPrecisionPolicy{}).enabled, false);
}

// step(opt, factor, norm): a finite norm of the stored gradients stands in for step()'s own
// pass over them where no scale can overflow them. To see that the pass is skipped, one test
// hands over a finite norm for a NaN gradient (a caller's lie): the step goes through.
TEST(GradScaler, AFiniteGradNormStandsInForTheNonFiniteTest) {
  for (const bool call_unscale : {true, false}) {
    GradScaler off(ScalerOptions::none());
    RecordingSgd opt({param("w", 4, DType::bf16, NAN)});
    // A disabled scaler's unscale() has nothing to multiply but tests (clipping may follow):
    // its finding beats the norm.
    if (call_unscale) off.unscale(opt);
    EXPECT_EQ(off.step(opt, 1.0f, 2.0).stepped, !call_unscale);
    off.update();
    if (call_unscale) off.unscale(opt);
    const StepReport r = off.step(opt, 1.0f, INFINITY);  // the true norm: step() tests
    EXPECT_FALSE(r.stepped);
    EXPECT_EQ(r.first_nonfinite, "w");
    off.update();
    if (call_unscale) off.unscale(opt);
    EXPECT_FALSE(off.step(opt).stepped);  // no norm: step() tests
    off.update();
    EXPECT_EQ(opt.calls, call_unscale ? 0 : 1);
  }
  // A scale >= 1 folded into the step (no unscale()) cannot overflow a finite gradient...
  GradScaler dynamic(ScalerOptions::dynamic_defaults());
  RecordingSgd a({param("a", 4, DType::f32, NAN)});
  EXPECT_TRUE(dynamic.step(a, 1.0f, 5.0).stepped);
  dynamic.update();
  // ... a scale below 1 can: 3e38 / 0.5 is inf, so step() tests despite a finite norm.
  GradScaler small(ScalerOptions::fixed(0.5));
  RecordingSgd b({param("b", 4, DType::f32, 3e38)});
  const StepReport r = small.step(b, 1.0f, 6e38);
  EXPECT_FALSE(r.stepped);
  EXPECT_EQ(r.first_nonfinite, "b");
  small.update();
  // An enabled scaler's unscale() has tested already: the norm changes nothing.
  GradScaler tested(ScalerOptions::dynamic_defaults());
  RecordingSgd c({param("c", 4, DType::f32, INFINITY)});
  tested.unscale(c);
  EXPECT_FALSE(tested.step(c, 1.0f, 1.0).stepped);
  tested.update();
  // Under a found-inf reduction every rank must call it: the norm is ignored.
  GradScaler reduced(ScalerOptions::none());
  int reductions = 0;
  reduced.set_found_inf_reduction([&](bool found) {
    ++reductions;
    return found;
  });
  RecordingSgd d({param("d", 4, DType::f32, NAN)});
  reduced.unscale(d);
  EXPECT_FALSE(reduced.step(d, 1.0f, 1.0).stepped);
  EXPECT_EQ(reductions, 1);
  reduced.update();
  // No gradient at all is still an error.
  GradScaler none(ScalerOptions::none());
  RecordingSgd e({param("e", 4, DType::f32, 1.0)});
  e.parameters()[0]->set_grad(Tensor());
  EXPECT_THROW(none.step(e, 1.0f, 0.0), Error);
}

TEST(GradScaler, StaticScalerNeverChanges) {
  GradScaler scaler(ScalerOptions::fixed(128));
  RecordingSgd opt({param("w", 4, DType::f32, 1.0)});
  iterate(scaler, opt, false);
  iterate(scaler, opt, true);
  EXPECT_EQ(scaler.get_scale(), 128.0f);
}

TEST(GradScaler, SeveralOptimizersShareOneScale) {
  ScalerOptions o;
  o.init_scale = 64;
  GradScaler scaler(o);
  RecordingSgd a({param("a", 3, DType::f32, 1.0)}), b({param("b", 3, DType::f32, INFINITY)});
  EXPECT_TRUE(scaler.step(a).stepped);
  EXPECT_FALSE(scaler.step(b).stepped);
  scaler.update();  // one optimizer overflowed: the shared scale backs off
  EXPECT_EQ(scaler.get_scale(), 32.0f);
}

TEST(GradScaler, StateRoundTripsExactlyAndContinuesTheSameTrajectory) {
  ScalerOptions o;
  o.growth_interval = 3;
  o.hysteresis = 2;
  GradScaler a(o);
  RecordingSgd opt({param("w", 2, DType::f32, 1.0)});
  for (bool f : {true, false, true, true}) iterate(a, opt, f);
  GradScaler b(o);
  b.load_checkpoint_dict(a.checkpoint_dict());  // state_dict() and the step counters
  EXPECT_EQ(b.state(), a.state());
  for (bool f : {true, true, false, false, true, true, true}) {
    iterate(a, opt, f);
    iterate(b, opt, f);
    EXPECT_EQ(a.state(), b.state());
  }
  optim::StateDict broken = a.state_dict();
  broken.erase("_growth_tracker");
  EXPECT_THROW(b.load_state_dict(broken), Error);
}

TEST(GradScaler, AFailedStepLeavesNoRecordAndTheScaleNeverReachesZero) {
  GradScaler scaler;
  RecordingSgd empty({param("v", 3, DType::f32, 1.0)});
  empty.zero_grad();
  EXPECT_THROW(scaler.step(empty), Error);
  EXPECT_THROW(scaler.update(), Error);  // the failed step() recorded nothing
  // Backing off from a tiny scale stops at the smallest normal f32: 1/scale stays finite.
  ScalerOptions o;
  o.init_scale = std::ldexp(1.0, -120);
  GradScaler tiny(o);
  RecordingSgd opt({param("w", 2, DType::f32, 1.0)});
  for (int i = 0; i < 20; ++i) iterate(tiny, opt, false);
  EXPECT_EQ(tiny.get_scale(), FLT_MIN);
  EXPECT_TRUE(iterate(tiny, opt, true).stepped);
  EXPECT_TRUE(std::isfinite(opt.last_inv_scale));
  // A saved state that could not come from these options is refused.
  ScalerState bad = GradScaler().state();
  bad.hysteresis_left = 4;
  EXPECT_THROW(GradScaler().load_state(bad), Error);
}

double value_of(const TensorMap& dict, const std::string& key) {
  return dict.at(key).to_doubles().at(0);
}

// torch.amp.GradScaler.state_dict(): scale, growth_factor, backoff_factor, growth_interval and
// _growth_tracker; load_state_dict() restores the factors and interval with the scale.
TEST(GradScaler, StateDictCarriesPyTorchsKeysAndLoadingRestoresTheFactors) {
  ScalerOptions o;
  o.init_scale = 256;
  o.growth_factor = 4.0;
  o.backoff_factor = 0.25;
  o.growth_interval = 3;
  GradScaler a(o);
  RecordingSgd opt({param("w", 2, DType::f32, 1.0)});
  iterate(a, opt, true);
  const TensorMap dict = a.state_dict();
  for (const char* key :
       {"scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker",
        "hysteresis", "hysteresis_left", "min_scale", "max_scale"})
    EXPECT_TRUE(dict.count(key)) << key;
  EXPECT_EQ(dict.size(), 9u);
  EXPECT_EQ(value_of(dict, "scale"), 256.0);
  EXPECT_EQ(value_of(dict, "growth_factor"), 4.0);
  EXPECT_EQ(value_of(dict, "backoff_factor"), 0.25);
  EXPECT_EQ(value_of(dict, "growth_interval"), 3.0);
  EXPECT_EQ(value_of(dict, "_growth_tracker"), 1.0);

  GradScaler b;  // PyTorch's defaults until the load
  b.load_state_dict(dict);
  EXPECT_EQ(b.options().growth_factor, 4.0);
  EXPECT_EQ(b.options().backoff_factor, 0.25);
  EXPECT_EQ(b.options().growth_interval, 3);
  EXPECT_EQ(b.state().growth_tracker, 1);
  for (bool f : {true, true, false, true, true, true}) {  // the same trajectory from here on
    iterate(a, opt, f);
    iterate(b, opt, f);
    EXPECT_EQ(a.get_scale(), b.get_scale());
  }
  EXPECT_EQ(b.get_scale(), 256.0f * 4 * 0.25f * 4);

  TensorMap bad = dict;
  bad["growth_factor"] = Tensor::from_vector(std::vector<double>{0.5});
  GradScaler c;
  EXPECT_THROW(c.load_state_dict(bad), Error);
  EXPECT_EQ(c.options().growth_factor, 2.0);  // a refused load changes nothing
  bad = dict;
  bad.erase("backoff_factor");
  EXPECT_NE(testing::error_of([&] { c.load_state_dict(bad); }).find("'backoff_factor'"),
            std::string::npos);
}

// PyTorch: a disabled scaler's state_dict() is {}, its load_state_dict() ignores the dict, and
// an enabled one loading {} raises "The source state dict is empty, possibly because it was
// saved from a disabled instance of GradScaler."
// torch.amp.GradScaler.load_state_dict: a dict with only PyTorch's five keys (as
// state_dict() gives them in PyTorch) loads; mixprec's own options stay, the hysteresis
// allowance starts full. A missing PyTorch key is still refused, naming it.
TEST(GradScaler, LoadsAStateDictWithOnlyPyTorchsFiveKeys) {
  const TensorMap torch_dict{{"scale", Tensor::from_vector(std::vector<float>{1024.0f})},
                             {"growth_factor", Tensor::from_vector(std::vector<double>{2.0})},
                             {"backoff_factor", Tensor::from_vector(std::vector<double>{0.5})},
                             {"growth_interval", Tensor::from_vector(std::vector<int64_t>{100})},
                             {"_growth_tracker", Tensor::from_vector(std::vector<int64_t>{7})}};
  ScalerOptions o;
  o.hysteresis = 2;
  o.max_scale = 1e6;
  GradScaler scaler(o);
  scaler.load_state_dict(torch_dict);
  EXPECT_EQ(scaler.get_scale(), 1024.0f);
  EXPECT_EQ(scaler.state().growth_tracker, 7);
  EXPECT_EQ(scaler.options().growth_interval, 100);
  EXPECT_EQ(scaler.options().hysteresis, 2);
  EXPECT_EQ(scaler.options().max_scale, 1e6);
  EXPECT_EQ(scaler.state().hysteresis_left, 2);
  for (const char* key :
       {"scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker"}) {
    TensorMap missing = torch_dict;
    missing.erase(key);
    GradScaler fresh;
    try {
      fresh.load_state_dict(missing);
      ADD_FAILURE() << "loaded without " << key;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
    }
  }
}

// torch.amp.GradScaler.step: without an explicit unscale_(), step() unscales .grad in place
// first. With unscale_in_step (ScalerOptions::pytorch()) mixprec does so too; its default
// leaves .grad scaled and folds 1/scale into the optimizer's pass.
TEST(GradScaler, StepUnscalesTheGradientsInPlaceWithPyTorchsConvention) {
  for (const bool pytorch : {false, true}) {
    ScalerOptions o = pytorch ? ScalerOptions::pytorch() : ScalerOptions::dynamic_defaults();
    o.init_scale = 8.0;
    GradScaler scaler(o);
    RecordingSgd opt({param("w", 3, DType::f32, 4.0)});
    EXPECT_TRUE(scaler.step(opt).stepped);
    EXPECT_EQ(opt.parameters()[0]->grad().to_doubles()[1], pytorch ? 0.5 : 4.0);
    EXPECT_EQ(opt.last_inv_scale, pytorch ? 1.0f : 0.125f);
    scaler.update();
  }
}

// torch.amp.GradScaler.unscale_ raises "Attempting to unscale FP16 gradients."; with
// allow_fp16_grads = false (ScalerOptions::pytorch()) mixprec does too, naming the parameter.
TEST(GradScaler, RefusesFp16GradientsWithPyTorchsConvention) {
  GradScaler scaler(ScalerOptions::pytorch());
  RecordingSgd opt({param("a", 3, DType::f32, 1.0), param("b", 3, DType::f16, 1.0)});
  try {
    scaler.unscale(opt);
    FAIL() << "f16 gradients unscaled";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Attempting to unscale FP16 gradients."),
              std::string::npos);
    EXPECT_NE(std::string(e.what()).find("'b'"), std::string::npos) << e.what();
  }
  EXPECT_EQ(opt.parameters()[1]->grad().to_doubles()[0], 1.0);  // untouched
  RecordingSgd bf16({param("c", 3, DType::bf16, 1.0)});         // bf16 is fine, as in PyTorch
  EXPECT_NO_THROW(scaler.unscale(bf16));
}

TEST(GradScaler, ADisabledScalersStateIsEmptyAndAnEnabledOneRefusesIt) {
  GradScaler off(ScalerOptions::none());
  EXPECT_TRUE(off.state_dict().empty());
  off.load_state_dict(GradScaler().state_dict());  // ignored
  EXPECT_EQ(off.get_scale(), 1.0f);
  GradScaler on;
  const std::string m = testing::error_of([&] { on.load_state_dict(off.state_dict()); });
  EXPECT_NE(m.find("empty"), std::string::npos) << m;
  EXPECT_NE(m.find("disabled"), std::string::npos) << m;
  EXPECT_EQ(on.get_scale(), 65536.0f);
}

// The checkpoint's entries add the step counters, which a disabled scaler keeps too.
TEST(GradScaler, CheckpointEntriesKeepTheCountersOfADisabledScaler) {
  GradScaler off(ScalerOptions::none());
  RecordingSgd opt({param("w", 2, DType::f32, 1.0)});
  for (bool f : {true, false, false, true}) iterate(off, opt, f);
  const TensorMap entries = off.checkpoint_dict();
  EXPECT_EQ(entries.size(), 2u);
  GradScaler restored(ScalerOptions::none());
  restored.load_checkpoint_dict(entries);
  EXPECT_EQ(restored.state().steps_skipped, 2);
  EXPECT_EQ(restored.state().steps_taken, 2);
  // An fp16 run's scaler cannot resume from a bf16 run's entries: they hold no scale.
  GradScaler on;
  EXPECT_THROW(on.load_checkpoint_dict(entries), Error);
  EXPECT_EQ(on.state().steps_skipped, 0);  // nothing changed
  // Entries written before the factors were saved ("growth_tracker") keep the options.
  TensorMap legacy = GradScaler().checkpoint_dict();
  for (const char* key : {"growth_factor", "backoff_factor", "growth_interval", "hysteresis",
                          "min_scale", "max_scale"})
    legacy.erase(key);
  legacy["growth_tracker"] = legacy.at("_growth_tracker");
  legacy.erase("_growth_tracker");
  ScalerOptions o;
  o.growth_interval = 7;
  GradScaler old_run(o);
  old_run.load_checkpoint_dict(legacy);
  EXPECT_EQ(old_run.options().growth_interval, 7);
}

// torch.amp.GradScaler.update(new_scale): the scale is set directly, no inf check has to have
// been recorded, and the growth tracker is left alone.
TEST(GradScaler, UpdateWithANewScaleSetsItDirectly) {
  ScalerOptions o;
  o.growth_interval = 3;
  GradScaler scaler(o);
  RecordingSgd opt({param("w", 2, DType::f32, 1.0)});
  iterate(scaler, opt, true);
  iterate(scaler, opt, true);
  scaler.update(1024.0);  // nothing was stepped since the last update(): still fine
  EXPECT_EQ(scaler.get_scale(), 1024.0f);
  EXPECT_EQ(scaler.state().growth_tracker, 2);
  iterate(scaler, opt, true);  // the third finite step in a row grows it
  EXPECT_EQ(scaler.get_scale(), 2048.0f);
  EXPECT_TRUE(scaler.step(opt).stepped);
  scaler.update(8.0);  // after a step(): replaces the rule's update
  EXPECT_EQ(scaler.get_scale(), 8.0f);
  EXPECT_THROW(scaler.update(0.0), Error);
  EXPECT_THROW(scaler.update(1e39), Error);  // inf in f32
  GradScaler off(ScalerOptions::none());
  off.update(4.0);  // PyTorch: a disabled scaler's update() returns at once
  EXPECT_EQ(off.get_scale(), 1.0f);
}

// torch.nn.utils.clip_grad_value_ clamps +-inf to +-clip: after a disabled scaler's unscale()
// the inf test has been made, so the clipped step is still skipped.
TEST(GradScaler, ClippingByValueAfterUnscaleCannotHideAnInf) {
  for (const ScalerOptions& o : {ScalerOptions::none(), ScalerOptions::dynamic_defaults()}) {
    GradScaler scaler(o);
    RecordingSgd opt({param("w", 3, DType::bf16, INFINITY)});
    scaler.unscale(opt);
    optim::clip_grad_value(opt.parameters(), 0.5);
    EXPECT_EQ(opt.parameters()[0]->grad().to_doubles(), std::vector<double>(3, 0.5));
    const StepReport r = scaler.step(opt);
    EXPECT_FALSE(r.stepped);
    EXPECT_EQ(r.first_nonfinite, "w");
    EXPECT_EQ(opt.calls, 0);
    scaler.update();
  }
}

TEST(GradScaler, BadOptionsAreErrors) {
  ScalerOptions o;
  o.growth_factor = 1.0;
  EXPECT_THROW(GradScaler{o}, Error);
  o = {};
  o.backoff_factor = 1.5;
  EXPECT_THROW(GradScaler{o}, Error);
  o = {};
  o.init_scale = 1e39;  // inf in f32
  EXPECT_THROW(GradScaler{o}, Error);
  EXPECT_THROW(ScalerOptions::fixed(0), Error);
}

}  // namespace
}  // namespace mixprec::amp
