// Pure low-precision masters: updates below half an ulp vanish under round-to-nearest, add up
// in expectation under stochastic rounding and add up to f32-like accuracy under Kahan
// compensation; stochastic rounding is reproducible for a seed and keyed by (seed, step,
// element index) as documented.
#include <gtest/gtest.h>

#include <cmath>

#include "mixprec/numerics/convert.h"
#include "mixprec/optim/adamw.h"
#include "mixprec/optim/sgd.h"
#include "optim/fused_update.h"
#include "optim_testing.h"

namespace mixprec::optim {
namespace {

using mixprec::testing::same_bits;
using testing::make_policy;
using testing::pure;

constexpr int64_t kN = 20000;
constexpr int kSteps = 100;
constexpr float kUpdate = 1e-3f;  // 0.128 of bf16's ulp at 1 (2^-7): RNE drops it

// Every element starts at 1 and receives +kUpdate per step (SGD, lr 1, gradient -kUpdate).
std::shared_ptr<Parameter> accumulate(const amp::MixedPrecisionPolicy& policy, uint64_t seed,
                                      int steps = kSteps, SGD** keep = nullptr) {
  auto p = std::make_shared<Parameter>("w", Tensor::ones({kN}), policy);
  static std::unique_ptr<SGD> last;
  last = std::make_unique<SGD>(ParamList{p}, 1.0, 0.0, SgdOptions{.seed = seed});
  for (int s = 0; s < steps; ++s) {
    p->set_grad(Tensor::full({kN}, -kUpdate, policy.reduce_dtype));
    last->step();
  }
  if (keep) *keep = last.get();
  return p;
}

double mean(const Tensor& t) {
  double s = 0;
  for (double v : t.to_doubles()) s += v;
  return s / static_cast<double>(t.numel());
}

const double kTarget = 1.0 + kSteps * static_cast<double>(kUpdate);  // 1.1

TEST(PureBf16, NearestRoundingStallsOnSmallUpdates) {
  auto p = accumulate(pure(DType::bf16, amp::MasterUpdate::nearest), 1);
  for (double v : p->master().to_doubles()) ASSERT_EQ(v, 1.0);
}

TEST(PureBf16, F32MasterAccumulatesTheReference) {
  auto p = accumulate(make_policy(DType::bf16), 1);
  EXPECT_NEAR(mean(p->master()), kTarget, 1e-5);
}

TEST(PureBf16, StochasticRoundingIsUnbiased) {
  // One step: each element rounds up to 1 + 2^-7 with probability kUpdate / 2^-7 = 0.128.
  auto one = accumulate(pure(DType::bf16, amp::MasterUpdate::stochastic), 3, 1);
  double ups = 0;
  for (double v : one->master().to_doubles()) {
    ASSERT_TRUE(v == 1.0 || v == 1 + 0x1p-7) << v;
    ups += v > 1.0;
  }
  const double p = kUpdate / 0x1p-7, sigma = std::sqrt(p * (1 - p) / kN);
  EXPECT_NEAR(ups / kN, p, 5 * sigma);
  // 100 steps: the mean follows the exact sum. Each rounding errs by at most one ulp (2^-7 in
  // [1, 2)), independently: per element sd <= 2^-7 * sqrt(100) / 2, over 20000 elements
  // 2.8e-4; 5 sd.
  auto p100 = accumulate(pure(DType::bf16, amp::MasterUpdate::stochastic), 3);
  EXPECT_NEAR(mean(p100->master()), kTarget, 1.4e-3);
}

TEST(PureBf16, KahanCompensationAccumulates) {
  SGD* opt = nullptr;
  auto p = accumulate(pure(DType::bf16, amp::MasterUpdate::kahan), 1, kSteps, &opt);
  const std::vector<double> v = p->master().to_doubles();
  const std::vector<double> c = opt->state_dict().at("w.kahan_comp").to_doubles();
  for (size_t i = 0; i < v.size(); ++i) {
    ASSERT_LE(std::fabs(v[i] - kTarget), 0x1p-7) << i;  // within one bf16 ulp
    // p - c is the compensated value. c is itself bf16: each step its rounding loses up to
    // half its ulp, |c| < 2^-8 (half of p's ulp) so at most 2^-17 per step, 100 steps 7.6e-4
    // (nearest rounding loses the whole 0.1).
    ASSERT_NEAR(v[i] - c[i], kTarget, kSteps * 0x1p-17) << i;
  }
}

TEST(PureBf16, StochasticRoundingIsReproducibleForASeed) {
  const auto sr = pure(DType::bf16, amp::MasterUpdate::stochastic);
  auto a = accumulate(sr, 11, 10), b = accumulate(sr, 11, 10), c = accumulate(sr, 12, 10);
  EXPECT_TRUE(same_bits(a->master(), b->master()));
  EXPECT_FALSE(same_bits(a->master(), c->master()));
}

TEST(PureBf16, StochasticRoundingKeysAreSeedStepAndElementIndex) {
  // One SGD step from known values: the master must be the f32 result rounded by the bulk
  // conversion with seed, the documented stream for (name, step 1, buffer 0), index base 0.
  const auto sr = pure(DType::bf16, amp::MasterUpdate::stochastic);
  const Tensor init = mixprec::testing::randn({kN}, DType::f32, 5);
  const Tensor g = mixprec::testing::randn({kN}, DType::f32, 6, 1e-3).to(DType::bf16);
  auto p = std::make_shared<Parameter>("layer.w", init, sr);
  const Tensor start = p->master().to(DType::f32);
  SGD opt({p}, 0.5, 0.0, SgdOptions{.seed = 42});
  p->set_grad(g);
  opt.step();
  std::vector<float> expect(kN);
  const std::vector<double> s = start.to_doubles(), gv = g.to_doubles();
  for (int64_t i = 0; i < kN; ++i)
    expect[i] = static_cast<float>(s[i]) + (-0.5f) * static_cast<float>(gv[i]);
  Tensor want = Tensor::empty({kN}, DType::bf16);
  const detail::RoundingKeys keys{42, fnv1a("layer.w"), 1};
  convert_from_f32(
      expect.data(), DType::bf16, want.raw_data(), kN,
      {.rounding = Rounding::stochastic, .seed = 42, .stream = detail::rounding_stream(keys, 0)});
  EXPECT_TRUE(same_bits(p->master(), want));
}

TEST(PureBf16, AdamWStateIsStoredInBf16) {
  auto p = std::make_shared<Parameter>("w", Tensor::ones({64}),
                                       pure(DType::bf16, amp::MasterUpdate::kahan));
  AdamW opt({p}, 1e-3);
  p->set_grad(Tensor::full({64}, 0.5, DType::bf16));
  opt.step();
  const StateDict sd = opt.state_dict();
  EXPECT_EQ(sd.at("w.exp_avg").dtype(), DType::bf16);
  EXPECT_EQ(sd.at("w.exp_avg_sq").dtype(), DType::bf16);
  EXPECT_EQ(sd.at("w.kahan_comp").dtype(), DType::bf16);
  // First step: m = 0.1 * 0.5 = 0.05, v = 0.001 * 0.25; the step is lr * sign = 1e-3 after
  // the decay 1 - lr * wd = 1 - 1e-5. p - c carries it to within c's own bf16 rounding
  // (|c| <= 2^-9 here, so 2^-18 ~ 4e-6).
  EXPECT_EQ(sd.at("w.exp_avg").to_doubles()[0], static_cast<double>(bf16(0.05f)));
  const double p0 = p->master().to_doubles()[0], c0 = sd.at("w.kahan_comp").to_doubles()[0];
  EXPECT_NEAR(p0 - c0, 1.0 - 1e-5 - 1e-3, 5e-6);
}

}  // namespace
}  // namespace mixprec::optim
