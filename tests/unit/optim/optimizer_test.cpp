// Behaviour every optimizer shares: the working copy is the master rounded after each step,
// bf16/f16 gradients are read as their exact f32 values, inv_scale folded into the step equals
// unscaling first, the bits do not depend on the thread count, state_dict round-trips exactly,
// parameters without gradients are left alone, no_weight_decay is honoured.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <string>

#include "mixprec/optim/adam_mini.h"
#include "mixprec/optim/adamw.h"
#include "mixprec/optim/optimizer_table.h"
#include "mixprec/optim/sgd.h"
#include "optim_testing.h"

namespace mixprec::optim {
namespace {

using mixprec::testing::randn;
using mixprec::testing::same_bits;
using mixprec::testing::with_threads;
using testing::make_param;
using testing::make_policy;
using testing::pure;

using Factory = std::function<std::unique_ptr<StatefulOptimizer>(ParamList)>;

struct Kind {
  const char* name;
  Factory make;
};

std::vector<Kind> kinds() {
  return {
      {"sgd",
       [](ParamList p) {
         return std::make_unique<SGD>(std::move(p), 0.05, 0.01,
                                      SgdOptions{.momentum = 0.9, .nesterov = true, .seed = 7});
       }},
      {"adamw",
       [](ParamList p) {
         return std::make_unique<AdamW>(std::move(p), 1e-2, 0.1, AdamWOptions{.seed = 7});
       }},
      {"adam_mini",
       [](ParamList p) {
         return std::make_unique<AdamMini>(std::move(p), 1e-2, 0.1, AdamMiniOptions{.seed = 7});
       }},
  };
}

// [300, 700]: 210,000 elements, several parallel chunks and tiles, a ragged last tile.
const Shape kShape{300, 700};

Tensor grad_for(int step, DType dtype, double scale = 1.0) {
  return randn(kShape, DType::f32, 100 + static_cast<uint64_t>(step), scale).to(dtype);
}

// Gradients of magnitude >= 0.25 * scale: scaled down by 1 / scale they stay normal numbers
// in every dtype, so an unscale pass by a power of two is exact.
Tensor normal_range_grad(int step, DType dtype, double scale) {
  std::vector<double> v = randn(kShape, DType::f64, 100 + static_cast<uint64_t>(step)).to_doubles();
  for (double& x : v) x = std::copysign(0.25 + std::fabs(x), x) * scale;
  return Tensor::from_doubles(v, kShape, dtype);
}

TEST(Optimizers, WorkingCopyIsTheMasterRoundedAfterEachStep) {
  for (const Kind& k : kinds())
    for (DType param : {DType::bf16, DType::f16}) {
      auto p = make_param("w", kShape, 1, make_policy(param));
      auto opt = k.make({p});
      for (int s = 0; s < 3; ++s) {
        p->set_grad(grad_for(s, DType::f32));
        opt->step();
        EXPECT_TRUE(same_bits(p->value(), p->master().to(param)))
            << k.name << " " << dtype_name(param) << " step " << s;
      }
      EXPECT_FALSE(
          same_bits(p->master(), make_param("w", kShape, 1, make_policy(param))->master()));
    }
}

TEST(Optimizers, NarrowGradientsAreReadAsTheirExactF32Values) {
  for (const Kind& k : kinds())
    for (DType gdt : {DType::bf16, DType::f16}) {
      auto a = make_param("w", kShape, 2, make_policy(DType::bf16, gdt));
      auto b = make_param("w", kShape, 2, make_policy(DType::bf16, DType::f32));
      auto oa = k.make({a}), ob = k.make({b});
      for (int s = 0; s < 3; ++s) {
        const Tensor g = grad_for(s, gdt);
        a->set_grad(g);
        b->set_grad(g.to(DType::f32));
        oa->step();
        ob->step();
      }
      EXPECT_TRUE(same_bits(a->master(), b->master())) << k.name << " " << dtype_name(gdt);
    }
}

// g * inv_scale computed elementwise in f32 and stored in g's dtype: what an unscale pass
// writes.
Tensor unscaled(const Tensor& g, float inv_scale) {
  const std::vector<double> v = g.to_doubles();
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = static_cast<float>(v[i]) * inv_scale;
  return Tensor::from_vector(out, g.shape()).to(g.dtype());
}

TEST(Optimizers, FoldedInvScaleEqualsUnscalingFirst) {
  // f32 gradients with any scale; bf16/f16 gradients with the loss scaler's powers of two,
  // which are exact unless a value underflows into subnormals (f16 below 2^-14: there, and
  // with other factors, an unscale pass rounds once more and folding is the more accurate).
  struct Case {
    DType dtype;
    float inv_scale;
    double grad_scale;
  };
  for (const Case c : {Case{DType::f32, 1.0f / 3000.0f, 3000.0},
                       Case{DType::bf16, 0x1p-16f, 65536.0}, Case{DType::f16, 0x1p-10f, 1024.0}})
    for (const Kind& k : kinds()) {
      auto a = make_param("w", kShape, 3, make_policy(DType::bf16, c.dtype));
      auto b = make_param("w", kShape, 3, make_policy(DType::bf16, c.dtype));
      auto oa = k.make({a}), ob = k.make({b});
      for (int s = 0; s < 3; ++s) {
        const Tensor g = normal_range_grad(s, c.dtype, c.grad_scale);
        a->set_grad(g);
        b->set_grad(unscaled(g, c.inv_scale));
        oa->step(c.inv_scale);
        ob->step();
      }
      EXPECT_TRUE(same_bits(a->master(), b->master())) << k.name << " " << dtype_name(c.dtype);
      EXPECT_TRUE(same_bits(a->value(), b->value())) << k.name << " " << dtype_name(c.dtype);
    }
}

struct PolicyCase {
  const char* name;
  amp::MixedPrecisionPolicy policy;
};

std::vector<PolicyCase> policies() {
  return {{"fp32", make_policy(DType::f32)},
          {"bf16-mixed", make_policy(DType::bf16)},
          {"bf16-pure-nearest", pure(DType::bf16, amp::MasterUpdate::nearest)},
          {"bf16-pure-sr", pure(DType::bf16, amp::MasterUpdate::stochastic)},
          {"bf16-pure-kahan", pure(DType::bf16, amp::MasterUpdate::kahan)},
          {"f16-pure-sr", pure(DType::f16, amp::MasterUpdate::stochastic)}};
}

// Masters and state after 3 steps, run with `threads` threads.
StateDict run(const Kind& k, const amp::MixedPrecisionPolicy& policy, int threads, Tensor* master) {
  return with_threads(threads, [&] {
    auto p = make_param("w", kShape, 4, policy);
    auto opt = k.make({p});
    for (int s = 0; s < 3; ++s) {
      p->set_grad(grad_for(s, policy.reduce_dtype));
      opt->step();
    }
    *master = p->master().clone();
    return opt->state_dict();
  });
}

void expect_same_state(const StateDict& a, const StateDict& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (const auto& [key, t] : a) {
    ASSERT_TRUE(b.count(key)) << what << " " << key;
    EXPECT_TRUE(same_bits(t, b.at(key))) << what << " " << key;
  }
}

TEST(Optimizers, OneAndTwoThreadsGiveTheSameBits) {
  for (const Kind& k : kinds())
    for (const PolicyCase& pc : policies()) {
      Tensor m1, m2;
      const StateDict s1 = run(k, pc.policy, 1, &m1), s2 = run(k, pc.policy, 2, &m2);
      const std::string what = std::string(k.name) + " " + pc.name;
      EXPECT_TRUE(same_bits(m1, m2)) << what;
      expect_same_state(s1, s2, what);
    }
}

TEST(Optimizers, StateDictRoundTripsExactly) {
  for (const Kind& k : kinds())
    for (const PolicyCase& pc : policies()) {
      const std::string what = std::string(k.name) + " " + pc.name;
      auto a = make_param("w", kShape, 5, pc.policy);
      auto a_bias = make_param("b", {700}, 6, pc.policy, ParamRole{.no_weight_decay = true});
      auto oa = k.make({a, a_bias});
      for (int s = 0; s < 2; ++s) {
        a->set_grad(grad_for(s, pc.policy.reduce_dtype));
        a_bias->set_grad(randn({700}, DType::f32, 50 + s).to(pc.policy.reduce_dtype));
        oa->step();
      }
      // A fresh optimizer over parameters holding the same masters resumes bit-identically.
      auto b = make_param("w", kShape, 99, pc.policy);
      auto b_bias = make_param("b", {700}, 98, pc.policy, ParamRole{.no_weight_decay = true});
      {
        NoGradGuard no_grad;  // the master may be the leaf itself (fp32, pure policies)
        b->master().copy_from(a->master());
        b_bias->master().copy_from(a_bias->master());
      }
      b->refresh();
      b_bias->refresh();
      auto ob = k.make({b, b_bias});
      const StateDict saved = oa->state_dict();
      ob->load_state_dict(saved);
      expect_same_state(ob->state_dict(), saved, what);
      EXPECT_EQ(ob->steps(), 2) << what;
      EXPECT_EQ(ob->state_bytes(), oa->state_bytes()) << what;
      for (int s = 2; s < 4; ++s) {
        const Tensor g = grad_for(s, pc.policy.reduce_dtype);
        const Tensor gb = randn({700}, DType::f32, 50 + s).to(pc.policy.reduce_dtype);
        a->set_grad(g);
        b->set_grad(g);
        a_bias->set_grad(gb);
        b_bias->set_grad(gb);
        oa->step();
        ob->step();
      }
      EXPECT_TRUE(same_bits(a->master(), b->master())) << what;
      EXPECT_TRUE(same_bits(a_bias->master(), b_bias->master())) << what;
    }
}

TEST(Optimizers, LoadStateDictRejectsBadEntriesAndChangesNothing) {
  auto p = make_param("w", {4, 3}, 7, make_policy(DType::f32));
  AdamW opt({p}, 1e-2);
  p->set_grad(randn({4, 3}, DType::f32, 8));
  opt.step();
  const StateDict good = opt.state_dict();
  EXPECT_EQ(good.size(), 4u);  // step, w.step, w.exp_avg, w.exp_avg_sq
  auto expect_rejected = [&](StateDict bad, const std::string& key) {
    try {
      opt.load_state_dict(bad);
      FAIL() << "accepted a state dict with a bad '" << key << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
    }
    expect_same_state(opt.state_dict(), good, key);
  };
  StateDict missing = good;
  missing.erase("w.exp_avg_sq");
  expect_rejected(missing, "w.exp_avg_sq");
  StateDict shape = good;
  shape["w.exp_avg"] = Tensor::zeros({3, 4});
  expect_rejected(shape, "w.exp_avg");
  StateDict dtype = good;
  dtype["w.exp_avg"] = Tensor::zeros({4, 3}, DType::bf16);
  expect_rejected(dtype, "w.exp_avg");
  StateDict extra = good;
  extra["v.exp_avg"] = Tensor::zeros({4, 3});
  expect_rejected(extra, "v.exp_avg");
  StateDict step = good;
  step["step"] = Tensor::full({}, 1.5, DType::f64);
  expect_rejected(step, "step");
}

TEST(Optimizers, ParametersWithoutGradientsAreLeftAlone) {
  for (const Kind& k : kinds()) {
    auto a = make_param("a", {8, 8}, 9, make_policy(DType::bf16));
    auto b = make_param("b", {8, 8}, 10, make_policy(DType::bf16));
    const Tensor b0 = b->master().clone();
    auto opt = k.make({a, b});
    a->set_grad(randn({8, 8}, DType::f32, 11));
    opt->step();
    EXPECT_TRUE(same_bits(b->master(), b0)) << k.name;
    const StateDict sd = opt->state_dict();
    EXPECT_TRUE(sd.count("a.step")) << k.name;
    EXPECT_FALSE(sd.count("b.step")) << k.name;
  }
}

TEST(Optimizers, StateBytesPerParameter) {
  const int64_t rows = 300, cols = 700, n = rows * cols;
  auto bytes = [&](const Kind& k, const amp::MixedPrecisionPolicy& policy) {
    auto p = make_param("w", kShape, 12, policy);
    auto opt = k.make({p});
    EXPECT_EQ(opt->state_bytes(), 0u);  // allocated on first update, as in PyTorch
    p->set_grad(grad_for(0, DType::f32));
    opt->step();
    return opt->state_bytes();
  };
  const std::vector<Kind> ks = kinds();  // sgd, adamw, adam_mini
  const auto fp32 = make_policy(DType::f32);
  const auto kahan = pure(DType::bf16, amp::MasterUpdate::kahan);
  EXPECT_EQ(bytes(ks[0], fp32), static_cast<size_t>(4 * n));
  EXPECT_EQ(bytes(ks[1], fp32), static_cast<size_t>(8 * n));
  EXPECT_EQ(bytes(ks[2], fp32), static_cast<size_t>(4 * n + 4 * rows));
  EXPECT_EQ(bytes(ks[1], kahan), static_cast<size_t>(6 * n));  // m, v, compensation in bf16
  EXPECT_EQ(bytes(ks[1], pure(DType::bf16, amp::MasterUpdate::stochastic)),
            static_cast<size_t>(4 * n));
}

TEST(Optimizers, NoWeightDecayRoleIsHonoured) {
  // Zero gradients: AdamW's update is 0 / (0 + eps) = 0, leaving the decay p * (1 - lr * wd).
  const amp::MixedPrecisionPolicy fp32 = make_policy(DType::f32);
  auto w = std::make_shared<Parameter>("w", Tensor::full({2}, 2.0), fp32);
  auto g = std::make_shared<Parameter>("g", Tensor::full({2}, 2.0), fp32,
                                       ParamRole{.no_weight_decay = true});
  AdamW opt({w, g}, 0.1, 0.5);
  w->set_grad(Tensor::zeros({2}));
  g->set_grad(Tensor::zeros({2}));
  opt.step();
  EXPECT_EQ(w->master().to_doubles(), std::vector<double>(2, static_cast<double>(2.0f * 0.95f)));
  EXPECT_EQ(g->master().to_doubles(), std::vector<double>(2, 2.0));
}

// optimizer.weight_decay_params = "all" (torchtitan's rule): every optimizer in the table
// decays the parameters the model marks no_weight_decay too, by the same factor as the others;
// "matrices" (nanoGPT's) leaves them alone. Zero gradients: only the decay moves a weight.
TEST(Optimizers, DecayEveryParameterReachesNormGainsInEveryOptimizer) {
  const amp::MixedPrecisionPolicy fp32 = make_policy(DType::f32);
  for (const OptimizerKind& kind : optimizer_kinds())
    for (const bool every : {false, true}) {
      SCOPED_TRACE(std::string(kind.name) + (every ? " all" : " matrices"));
      auto w = std::make_shared<Parameter>("w", Tensor::full({2, 2}, 2.0), fp32);
      auto g = std::make_shared<Parameter>("g", Tensor::full({2}, 2.0), fp32,
                                           ParamRole{.no_weight_decay = true});
      const auto opt = kind.make(
          {w, g},
          OptimizerSettings{.lr = 0.1, .weight_decay = 0.5, .decay_every_parameter = every});
      w->set_grad(Tensor::zeros({2, 2}));
      g->set_grad(Tensor::zeros({2}));
      opt->step();
      const double decayed = w->master().to_doubles()[0];
      EXPECT_LT(decayed, 2.0);
      EXPECT_EQ(g->master().to_doubles(), std::vector<double>(2, every ? decayed : 2.0));
    }
}

TEST(Optimizers, RejectBadGradientsAndOptions) {
  auto p = make_param("w", {4, 3}, 13, make_policy(DType::f32));
  AdamW opt({p}, 1e-2);
  p->set_grad(Tensor::zeros({4, 3}, DType::f64));
  EXPECT_THROW(opt.step(), Error);
  p->set_grad(Tensor::zeros({4, 3}));
  EXPECT_THROW(opt.step(INFINITY), Error);
  EXPECT_THROW(SGD({p}, 0.1, 0.0, SgdOptions{.nesterov = true}), Error);
  EXPECT_THROW(AdamW({p}, 0.1, 0.0, AdamWOptions{.beta2 = 1.0}), Error);
  EXPECT_THROW(AdamW({p, p}, 0.1), Error);  // the same name twice
}

TEST(Optimizers, ABadGradientAnywhereLeavesEveryParameterUnchanged) {
  auto a = make_param("a", {4, 3}, 14, make_policy(DType::bf16));
  auto b = make_param("b", {4, 3}, 15, make_policy(DType::bf16));
  AdamW opt({a, b}, 1e-2);
  a->set_grad(Tensor::ones({4, 3}));
  b->set_grad(Tensor::ones({4, 3}));
  opt.step();  // real state first
  const Tensor ma = a->master().clone(), wa = a->value().detach().clone();
  const StateDict before = opt.state_dict();
  b->set_grad(Tensor::zeros({4, 3}, DType::f64));  // a's gradient is fine, b's dtype is not
  EXPECT_THROW(opt.step(), Error);
  EXPECT_TRUE(same_bits(a->master(), ma));
  EXPECT_TRUE(same_bits(a->value(), wa));
  EXPECT_EQ(opt.steps(), 1);
  for (const auto& [key, t] : opt.state_dict()) EXPECT_TRUE(same_bits(t, before.at(key))) << key;
}

TEST(Optimizers, AWorkingCopyWiderThanItsMasterIsRefused) {
  amp::MixedPrecisionPolicy p = make_policy(DType::f64);  // f64 copy of an f32 master
  EXPECT_THROW(Parameter("w", Tensor::ones({2}), p), Error);
}

}  // namespace
}  // namespace mixprec::optim

namespace mixprec::optim {
namespace {

TEST(Optimizers, VectorAndScalarLoopsGiveTheSameBits) {
  // 13 elements in one tensor take the 4-lane loop and a scalar tail; as 13 one-element
  // tensors every element takes the scalar loop.
  const amp::MixedPrecisionPolicy fp32 = testing::make_policy(DType::f32);
  const Tensor init = randn({13}, DType::f32, 70);
  auto whole = std::make_shared<Parameter>("whole", init, fp32);
  ParamList parts;
  for (int64_t i = 0; i < 13; ++i)
    parts.push_back(std::make_shared<Parameter>(std::string(1, static_cast<char>('a' + i)),
                                                init.slice(0, i, i + 1), fp32));
  AdamW a({whole}, 1e-2, 0.1), b(parts, 1e-2, 0.1);
  for (int s = 0; s < 3; ++s) {
    const Tensor g = randn({13}, DType::f32, 71 + s);
    whole->set_grad(g);
    for (int64_t i = 0; i < 13; ++i) parts[i]->set_grad(g.slice(0, i, i + 1).contiguous());
    a.step(0.5f);
    b.step(0.5f);
  }
  const std::vector<double> w = whole->master().to_doubles();
  for (int64_t i = 0; i < 13; ++i) EXPECT_EQ(w[i], parts[i]->master().item()) << i;
}

}  // namespace
}  // namespace mixprec::optim
