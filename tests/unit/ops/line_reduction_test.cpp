// prod, cumsum, logsumexp and the p-norms at the edges PyTorch 1.13 defines: zeros in prod,
// ties in the inf norm, infinities in logsumexp, empty inputs; low precision as the f32
// result rounded once. Values against PyTorch and finite differences are the op registry's.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "mixprec/ops.h"
#include "support/op_testing.h"

namespace mixprec {
namespace {

using namespace testing;  // mixprec::testing, the op-test support

constexpr double kInf = std::numeric_limits<double>::infinity();

Tensor vec(std::vector<double> v, Shape shape = {}, DType dtype = DType::f64) {
  if (shape.empty()) shape = {static_cast<int64_t>(v.size())};
  return Tensor::from_doubles(v, shape, dtype);
}

// The gradient of sum(f(x)) at x (f64).
std::vector<double> grad_of(const std::function<Tensor(const Tensor&)>& f, std::vector<double> x,
                            Shape shape = {}) {
  Tensor t = vec(std::move(x), std::move(shape));
  t.set_requires_grad(true, DType::f64);
  sum(f(t)).backward();
  return t.grad().to_doubles();
}

// prod_backward: result/x without zeros; with zeros, the product of the others.
TEST(LineReductions, ProdGradientAtZerosIsTheProductOfTheOthers) {
  auto p = [](const Tensor& x) { return prod(x); };
  EXPECT_EQ(prod(vec({2, 0, 3})).item(), 0.0);
  EXPECT_EQ(grad_of(p, {2, 0, 3}), (std::vector<double>{0, 6, 0}));
  EXPECT_EQ(grad_of(p, {0, 0, 3}), (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(grad_of(p, {2, 4, 3}), (std::vector<double>{12, 6, 8}));
  auto p1 = [](const Tensor& x) { return prod(x, 1); };
  EXPECT_EQ(grad_of(p1, {2, 0, 3, 0, 0, 5, 1, 2, 3}, {3, 3}),
            (std::vector<double>{0, 6, 0, 0, 0, 0, 6, 3, 2}));
  // g·(result/x), PyTorch's order: no f32 overflow in g·result (torch: [1e20, 1e22]).
  Tensor big = Tensor::from_doubles({1e20, 1e18}, {2}, DType::f32);
  big.set_requires_grad(true);
  prod(big).backward(Tensor::full({}, 100.0, DType::f32));
  EXPECT_NEAR(big.grad().to_doubles()[0], 1e20, 1e14);
  EXPECT_NEAR(big.grad().to_doubles()[1], 1e22, 1e16);
  // Underflow to 0 without a zero in the input: PyTorch divides, 0/x = 0.
  EXPECT_EQ(grad_of(p, {1e-200, 1e-200, 5}), (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(prod(Tensor::zeros({0})).item(), 1.0);
  EXPECT_EQ(prod(Tensor::zeros({2, 0}), 1).to_doubles(), (std::vector<double>{1, 1}));
}

TEST(LineReductions, CumsumRunsAlongItsDimAndItsGradientRunsBack) {
  EXPECT_EQ(cumsum(vec({1, 2, 3, 4, 5, 6}, {2, 3}), 1).to_doubles(),
            (std::vector<double>{1, 3, 6, 4, 9, 15}));
  EXPECT_EQ(cumsum(vec({1, 2, 3, 4, 5, 6}, {2, 3}), 0).to_doubles(),
            (std::vector<double>{1, 2, 3, 5, 7, 9}));
  Tensor x = vec({1, 2, 3}, {1, 3});
  x.set_requires_grad(true, DType::f64);
  cumsum(x, 1).backward(vec({1, 10, 100}, {1, 3}));
  EXPECT_EQ(x.grad().to_doubles(), (std::vector<double>{111, 110, 100}));  // reversed cumsum
  EXPECT_EQ(cumsum(Tensor::zeros({0}), 0).numel(), 0);
}

// ATen's logsumexp: shifted by the max unless it is infinite.
TEST(LineReductions, LogsumexpAtInfinitiesAndNaN) {
  auto lse = [](std::vector<double> v) { return logsumexp(vec(std::move(v)), 0).item(); };
  EXPECT_EQ(lse({-kInf, -kInf}), -kInf);
  EXPECT_EQ(lse({kInf, 1, 2}), kInf);
  EXPECT_EQ(lse({kInf, -kInf, 0}), kInf);
  EXPECT_TRUE(std::isnan(lse({1, NAN, 2})));
  EXPECT_NEAR(lse({-kInf, 0, 1}), 1.3132616875182228, 1e-15);
  EXPECT_NEAR(lse({1000, 1000}), 1000 + std::log(2.0), 1e-12);  // no overflow
  auto f = [](const Tensor& x) { return logsumexp(x, 0); };
  const std::vector<double> all_neg_inf = grad_of(f, {-kInf, -kInf});
  EXPECT_TRUE(std::isnan(all_neg_inf[0]) && std::isnan(all_neg_inf[1]));  // as PyTorch
  const std::vector<double> g = grad_of(f, {-kInf, 0, 0});
  EXPECT_EQ(g, (std::vector<double>{0, 0.5, 0.5}));
  EXPECT_EQ(logsumexp(Tensor::zeros({2, 0}), 1).to_doubles()[0], -kInf);  // empty: log 0
}

// norm_backward: p = 1 is sgn(x), 0 at 0; inf splits the gradient evenly among the ties.
TEST(LineReductions, VectorNormGradientsAtZerosAndTies) {
  auto l1 = [](const Tensor& x) { return vector_norm(x, 1.0); };
  auto inf = [](const Tensor& x) { return vector_norm(x, kInf); };
  EXPECT_EQ(vector_norm(vec({3, -4, 0}), 1.0).item(), 7.0);
  EXPECT_EQ(grad_of(l1, {3, -4, 0}), (std::vector<double>{1, -1, 0}));
  EXPECT_EQ(vector_norm(vec({3, -4, 0}), kInf).item(), 4.0);
  EXPECT_EQ(grad_of(inf, {3, -3, 1}), (std::vector<double>{0.5, -0.5, 0}));
  const std::vector<double> third = grad_of(inf, {-2, 2, 2, 1});
  EXPECT_EQ(third, (std::vector<double>{-1.0 / 3, 1.0 / 3, 1.0 / 3, 0}));
  EXPECT_EQ(grad_of(inf, {0, 0}), (std::vector<double>{0, 0}));
  EXPECT_EQ(grad_of([](const Tensor& x) { return vector_norm(x, 3.0); }, {0, 0}),
            (std::vector<double>{0, 0}));  // 0 where the norm is 0
  EXPECT_NEAR(vector_norm(vec({1, 2, 3}), 3.0).item(), std::cbrt(36.0), 1e-15);
  EXPECT_EQ(vector_norm(vec({1, 2, 3, 4}, {2, 2}), kInf, 1).to_doubles(),
            (std::vector<double>{2, 4}));
  // ord 2 is norm; the empty sum is 0; the inf norm of nothing and orders below 1 are errors.
  EXPECT_TRUE(same_bits(vector_norm(vec({3, 4}), 2.0), norm(vec({3, 4}))));
  EXPECT_EQ(vector_norm(Tensor::zeros({0}), 1.0).item(), 0.0);
  EXPECT_NE(error_of([] { vector_norm(Tensor::zeros({0}), kInf); }).find("empty"),
            std::string::npos);
  EXPECT_THROW(vector_norm(vec({1, 2}), 0.5), Error);
  EXPECT_THROW(vector_norm(vec({1, 2}), NAN), Error);
}

// Low precision: the f32 computation on the same values, rounded once.
TEST(LineReductions, Bf16ResultsAreTheF32ResultsRoundedOnce) {
  const Tensor x = randn({4, 9, 3}, DType::bf16, 1);
  const Tensor x32 = x.to(DType::f32);
  EXPECT_TRUE(same_bits(prod(x, 1), prod(x32, 1).to(DType::bf16)));
  EXPECT_TRUE(same_bits(cumsum(x, 1), cumsum(x32, 1).to(DType::bf16)));
  EXPECT_TRUE(same_bits(logsumexp(x, 1), logsumexp(x32, 1).to(DType::bf16)));
  EXPECT_TRUE(same_bits(vector_norm(x, 1.0, 1), vector_norm(x32, 1.0, 1).to(DType::bf16)));
  EXPECT_TRUE(same_bits(vector_norm(x, kInf), vector_norm(x32, kInf).to(DType::bf16)));
}

TEST(LineReductions, SameBitsOnOneAndTwoThreads) {
  const Tensor x = randn({64, 33, 5}, DType::f32, 2);
  for (auto f : std::vector<std::function<Tensor()>>{
           [&] { return prod(x, 1); }, [&] { return cumsum(x, 1); },
           [&] { return logsumexp(x, 1); }, [&] { return vector_norm(x, 3.0, 0); }}) {
    const Tensor one = with_threads(1, f), two = with_threads(2, f);
    EXPECT_TRUE(same_bits(one, two));
  }
}

}  // namespace
}  // namespace mixprec
