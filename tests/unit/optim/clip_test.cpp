// Global-norm clipping: hand-computed norms, PyTorch's coefficient, in-place scaling in each
// gradient dtype, non-finite norms leave gradients alone, and the norm's bits do not depend on
// the thread count. Clipping by value against torch.nn.utils.clip_grad_value_ (a clamp), on
// both backends.
#include <gtest/gtest.h>

#include <cmath>

#include "mixprec/backend/backend.h"
#include "mixprec/optim/clip.h"
#include "optim_testing.h"

namespace mixprec::optim {
namespace {

using mixprec::testing::randn;
using mixprec::testing::same_bits;
using mixprec::testing::with_threads;
using testing::make_policy;

ParamList two_params(DType grad_dtype) {
  const auto policy = make_policy(DType::bf16, grad_dtype);
  auto a = std::make_shared<Parameter>("a", Tensor::zeros({2}), policy);
  auto b = std::make_shared<Parameter>("b", Tensor::zeros({1}), policy);
  auto c = std::make_shared<Parameter>("c", Tensor::zeros({3}), policy);  // no gradient
  a->set_grad(Tensor::from_vector(std::vector<float>{3, -4}).to(grad_dtype));
  b->set_grad(Tensor::from_vector(std::vector<float>{12}).to(grad_dtype));
  return {a, b, c};
}

TEST(ClipGradNorm, HandComputedNorm) {
  for (DType dt : {DType::f32, DType::bf16, DType::f16}) {
    const ParamList p = two_params(dt);
    EXPECT_EQ(grad_norm(p), 13.0) << dtype_name(dt);  // sqrt(9 + 16 + 144)
    EXPECT_EQ(grad_norm(p, 0.5f), 6.5) << dtype_name(dt);
  }
}

TEST(ClipGradNorm, CoefficientIsPyTorchs) {
  EXPECT_EQ(clip_coefficient(13.0, 6.5), static_cast<float>(6.5 / (13.0 + 1e-6)));
  EXPECT_EQ(clip_coefficient(13.0, 13.0), static_cast<float>(13.0 / (13.0 + 1e-6)));
  EXPECT_EQ(clip_coefficient(1.0, 2.0), 1.0f);
}

TEST(ClipGradNorm, ScalesEveryGradientInItsDtype) {
  for (DType dt : {DType::f32, DType::bf16, DType::f16}) {
    const ParamList p = two_params(dt);
    EXPECT_EQ(clip_grad_norm(p, 6.5), 13.0);
    const float coef = static_cast<float>(6.5 / (13.0 + 1e-6));
    const Tensor want_a = Tensor::from_vector(std::vector<float>{3 * coef, -4 * coef}).to(dt);
    const Tensor want_b = Tensor::from_vector(std::vector<float>{12 * coef}).to(dt);
    EXPECT_TRUE(same_bits(p[0]->grad(), want_a)) << dtype_name(dt);
    EXPECT_TRUE(same_bits(p[1]->grad(), want_b)) << dtype_name(dt);
    EXPECT_FALSE(p[2]->grad().defined());
  }
}

TEST(ClipGradNorm, BelowTheLimitNothingChanges) {
  const ParamList p = two_params(DType::f32);
  const Tensor a0 = p[0]->grad().clone();
  EXPECT_EQ(clip_grad_norm(p, 100.0), 13.0);
  EXPECT_TRUE(same_bits(p[0]->grad(), a0));
}

TEST(ClipGradNorm, NonFiniteNormLeavesGradientsUntouched) {
  for (float bad : {INFINITY, NAN}) {
    for (DType dt : {DType::f32, DType::bf16}) {
      const ParamList p = two_params(dt);
      p[1]->set_grad(Tensor::from_vector(std::vector<float>{bad}).to(dt));
      const Tensor a0 = p[0]->grad().clone();
      const double norm = clip_grad_norm(p, 1.0);
      EXPECT_FALSE(std::isfinite(norm));
      EXPECT_EQ(std::isnan(norm), std::isnan(bad));
      EXPECT_TRUE(same_bits(p[0]->grad(), a0)) << dtype_name(dt);
    }
  }
}

TEST(ClipGradNorm, NormIsIndependentOfThreadsAndMatchesF64) {
  const auto policy = make_policy(DType::bf16, DType::bf16);
  ParamList p;
  double ref = 0;
  for (int k = 0; k < 3; ++k) {
    const char* names[] = {"p0", "p1", "p2"};
    p.push_back(std::make_shared<Parameter>(names[k], Tensor::zeros({300000}), policy));
    const Tensor g = randn({300000}, DType::bf16, 30 + k);
    p.back()->set_grad(g);
    for (double v : g.to_doubles()) ref += v * v;
  }
  const double n1 = with_threads(1, [&] { return grad_norm(p); });
  const double n2 = with_threads(2, [&] { return grad_norm(p); });
  EXPECT_EQ(n1, n2);
  EXPECT_NEAR(n1, std::sqrt(ref), 1e-12 * std::sqrt(ref));
  EXPECT_THROW(clip_grad_norm(p, 0.0), Error);
}

// torch.nn.utils.clip_grad_value_: each element clamped to [-v, v] in place (torch.clamp: NaN
// stays NaN, +-inf become +-v), the bound rounded into the gradient's dtype; parameters
// without a gradient are skipped. The same bits on the cpu and reference backends, and for
// any thread count.
TEST(ClipGradValue, ClampsEachElementAsTorchClampDoes) {
  const std::vector<float> in = {3.0f, -4.0f, 0.25f, -0.3f, INFINITY, -INFINITY, NAN, 0.0f};
  for (const backend::Backend* b : {&backend::cpu_backend(), &backend::reference_backend()}) {
    backend::BackendScope scope(*b);
    for (DType dt : {DType::f32, DType::bf16, DType::f16, DType::f64}) {
      SCOPED_TRACE(std::string(b->name) + " " + dtype_name(dt));
      const auto policy = make_policy(DType::bf16, DType::f32);
      const ParamList p = {std::make_shared<Parameter>("a", Tensor::zeros({8}), policy),
                           std::make_shared<Parameter>("b", Tensor::zeros({1}), policy),
                           std::make_shared<Parameter>("c", Tensor::zeros({3}), policy)};
      p[0]->set_grad(Tensor::from_vector(in).to(dt));
      p[1]->set_grad(Tensor::from_vector(std::vector<float>{12}));
      clip_grad_value(p, 0.3);
      const double bound = Tensor::full({1}, 0.3, dt).to_doubles()[0];  // 0.3 rounded into dt
      const std::vector<double> got = p[0]->grad().to_doubles();
      const std::vector<double> want = {bound, -bound, 0.25, -bound, bound, -bound, NAN, 0.0};
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < want.size(); ++i) {
        if (std::isnan(want[i]))
          EXPECT_TRUE(std::isnan(got[i])) << i;
        else
          EXPECT_EQ(got[i], want[i]) << i;
      }
      EXPECT_EQ(p[0]->grad().dtype(), dt);
      EXPECT_EQ(p[1]->grad().to_doubles(), std::vector<double>{0.3f});  // 12 clamped (f32 0.3)
      EXPECT_FALSE(p[2]->grad().defined());
    }
  }
  EXPECT_THROW(clip_grad_value(two_params(DType::f32), 0.0), Error);
  EXPECT_THROW(clip_grad_value(two_params(DType::f32), INFINITY), Error);
}

TEST(ClipGradValue, SameBitsForAnyThreadCount) {
  const auto policy = make_policy(DType::bf16, DType::bf16);
  const Tensor g = randn({300000}, DType::bf16, 41);
  auto clipped = [&](int threads) {
    ParamList p{std::make_shared<Parameter>("w", Tensor::zeros({300000}), policy)};
    p[0]->set_grad(g.clone());
    with_threads(threads, [&] {
      clip_grad_value(p, 0.5);
      return 0;
    });
    return p[0]->grad();
  };
  const Tensor one = clipped(1);
  EXPECT_TRUE(same_bits(one, clipped(2)));
  for (double v : one.to_doubles()) EXPECT_LE(std::fabs(v), 0.5);
}

}  // namespace
}  // namespace mixprec::optim
