// exp, log, ..., softplus, pow: the edges PyTorch defines (poles, domain errors, softplus's
// threshold, pow's zero exponent), low precision as the f32 result rounded once, f64
// results against libm, and thread-count independence. Accuracy against PyTorch, the
// reference backend and finite differences is the op registry's (support/op_registry.h).
#include "mixprec/ops/pointwise.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "mixprec/ops.h"
#include "support/op_testing.h"

namespace mixprec {
namespace {

using namespace testing;  // mixprec::testing, the op-test support

Tensor vec(std::vector<double> v, DType dtype = DType::f32) {
  const Shape shape{static_cast<int64_t>(v.size())};
  return Tensor::from_doubles(v, shape, dtype);
}

double grad_at(Tensor (*f)(const Tensor&), double x) {
  Tensor t = vec({x});
  t.set_requires_grad(true);
  sum(f(t)).backward();
  return t.grad().to_doubles()[0];
}

// torch.log(0) = -inf, log(-1) = nan, reciprocal(0) = inf, rsqrt(0) = inf, sqrt(-1) = nan,
// and their gradients at the poles: d/dx log at 0 is inf, reciprocal's is -inf.
TEST(Pointwise, PolesAndDomainErrorsAreInfAndNaNAsInPyTorch) {
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(mixprec::log(vec({0.0})).to_doubles()[0], -inf);
  EXPECT_TRUE(std::isnan(mixprec::log(vec({-1.0})).to_doubles()[0]));
  EXPECT_EQ(reciprocal(vec({0.0})).to_doubles()[0], inf);
  EXPECT_EQ(reciprocal(vec({-0.0})).to_doubles()[0], -inf);
  EXPECT_EQ(rsqrt(vec({0.0})).to_doubles()[0], inf);
  EXPECT_TRUE(std::isnan(mixprec::sqrt(vec({-1.0})).to_doubles()[0]));
  EXPECT_EQ(log1p(vec({-1.0})).to_doubles()[0], -inf);
  EXPECT_EQ(grad_at(mixprec::log, 0.0), inf);
  EXPECT_EQ(grad_at(reciprocal, 0.0), -inf);
  EXPECT_EQ(grad_at(mixprec::sqrt, 0.0), inf);
  EXPECT_EQ(mixprec::exp(vec({100.0})).to_doubles()[0], inf);  // f32 overflow
  EXPECT_EQ(mixprec::exp(vec({-inf})).to_doubles()[0], 0.0);
  EXPECT_EQ(mixprec::tanh(vec({inf})).to_doubles()[0], 1.0);
}

// F.softplus: x itself (slope 1) where beta·x > threshold, log1p(exp(beta·x)) / beta below.
TEST(Pointwise, SoftplusIsLinearPastTheThreshold) {
  const Tensor x = vec({-30.0, 0.0, 19.5, 20.5, 1e30}, DType::f64);
  const std::vector<double> y = softplus(x).to_doubles();
  EXPECT_DOUBLE_EQ(y[0], std::log1p(std::exp(-30.0)));
  EXPECT_DOUBLE_EQ(y[1], std::log(2.0));
  EXPECT_DOUBLE_EQ(y[2], std::log1p(std::exp(19.5)));
  EXPECT_EQ(y[3], 20.5);
  EXPECT_EQ(y[4], 1e30);                   // no overflow through exp
  Tensor t = vec({3.0, 4.0}, DType::f64);  // beta 2, threshold 7: 6 < 7 < 8
  t.set_requires_grad(true, DType::f64);
  sum(softplus(t, 2.0, 7.0)).backward();
  const std::vector<double> g = t.grad().to_doubles();
  EXPECT_DOUBLE_EQ(g[0], 1.0 / (1.0 + std::exp(-6.0)));
  EXPECT_EQ(g[1], 1.0);
  EXPECT_THROW(softplus(t, 0.0), Error);
}

// torch.pow(x, 0) is 1 with gradient 0, even at x = 0 (where e·x^(e-1) would be 0·inf).
TEST(Pointwise, PowOfZeroExponentHasZeroGradient) {
  Tensor x = vec({0.0, -2.0, 3.0});
  x.set_requires_grad(true);
  const Tensor y = mixprec::pow(x, 0.0);
  EXPECT_EQ(y.to_doubles(), (std::vector<double>{1.0, 1.0, 1.0}));
  sum(y).backward();
  EXPECT_EQ(x.grad().to_doubles(), (std::vector<double>{0.0, 0.0, 0.0}));
  EXPECT_TRUE(std::isnan(mixprec::pow(vec({-2.0}), 0.5).to_doubles()[0]));  // as PyTorch
  EXPECT_EQ(mixprec::pow(vec({-2.0}), 3.0).to_doubles()[0], -8.0);
  EXPECT_THROW(mixprec::pow(x, std::nan("")), Error);
}

// bf16 and f16 results (and gradients) are the f32 ones on the same rounded inputs, rounded
// once; f64 runs in f64.
TEST(Pointwise, LowPrecisionIsTheF32ResultRoundedOnce) {
  Tensor (*const fns[])(const Tensor&) = {mixprec::exp,  mixprec::log, log1p,      expm1,
                                          mixprec::sqrt, rsqrt,        reciprocal, mixprec::tanh};
  for (DType d : {DType::bf16, DType::f16}) {
    for (auto* f : fns) {
      const Tensor x = vec({0.3, 1.7, 2.5, 0.01, 5.0}, d);
      const Tensor want = f(x.to(DType::f32)).to(d);
      EXPECT_TRUE(same_bits(f(x), want)) << dtype_name(d);
    }
  }
  const Tensor x64 = vec({0.3, 1.7}, DType::f64);
  EXPECT_EQ(mixprec::exp(x64).to_doubles()[0], std::exp(0.3));
  EXPECT_EQ(mixprec::tanh(x64).to_doubles()[1], std::tanh(1.7));
}

TEST(Pointwise, SameBitsForAnyThreadCount) {
  const Tensor x = randn({300001}, DType::bf16, 7);
  const Tensor g = randn({300001}, DType::bf16, 8);
  auto run = [&](int threads) {
    return with_threads(threads, [&] {
      Tensor t = x.clone();
      t.set_requires_grad(true);
      Tensor y = softplus(t, 1.5, 3.0);
      y.backward(g);
      return std::make_pair(y, t.grad());
    });
  };
  const auto [y1, g1] = run(1);
  const auto [y2, g2] = run(2);
  EXPECT_TRUE(same_bits(y1, y2));
  EXPECT_TRUE(same_bits(g1, g2));
}

TEST(Pointwise, IntegerInputsAreErrors) {
  EXPECT_THROW(mixprec::exp(Tensor::from_vector(std::vector<int64_t>{1, 2})), Error);
}

}  // namespace
}  // namespace mixprec
