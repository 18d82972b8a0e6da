// The losses at the edges PyTorch 1.13 defines, each value checked there (see the comments):
// smooth_l1's boundaries and beta = 0, l1's zero gradient, kl_div's xlogy, nll_loss's weights
// and ignored rows, BCE's clamps and the logits form at large magnitudes, cosine_similarity's
// per-norm eps floor; reductions and refused arguments. Values against PyTorch on random
// inputs and finite differences are the op registry's.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "mixprec/amp/autocast.h"
#include "mixprec/ops.h"
#include "support/op_testing.h"

namespace mixprec {
namespace {

using namespace testing;  // mixprec::testing, the op-test support

Tensor leaf(std::vector<double> v, Shape shape = {}) {
  if (shape.empty()) shape = {static_cast<int64_t>(v.size())};
  Tensor t = Tensor::from_doubles(v, shape, DType::f64);
  t.set_requires_grad(true, DType::f64);
  return t;
}

TEST(Losses, ReductionsOfTheElementwiseTerms) {
  const Tensor x = leaf({1, 2, 3}), t = leaf({1.5, 2, 1});
  EXPECT_EQ(mse_loss(x, t, Reduction::none).to_doubles(), (std::vector<double>{0.25, 0, 4}));
  EXPECT_EQ(mse_loss(x, t, Reduction::sum).item(), 4.25);
  EXPECT_NEAR(mse_loss(x, t).item(), 4.25 / 3, 1e-15);
  EXPECT_EQ(l1_loss(x, t, Reduction::sum).item(), 2.5);
  EXPECT_TRUE(std::isnan(mse_loss(leaf({}, {0}), leaf({}, {0})).item()));  // mean of nothing
  EXPECT_EQ(mse_loss(leaf({}, {0}), leaf({}, {0}), Reduction::sum).item(), 0.0);
  EXPECT_THROW(mse_loss(x, t, Reduction::batchmean), Error);  // kl_div's alone
  // input and target broadcast (PyTorch warns, then does the same)
  EXPECT_EQ(mse_loss(x, leaf({1}), Reduction::sum).item(), 5.0);
  mse_loss(x, t, Reduction::sum).backward();
  EXPECT_EQ(x.grad().to_doubles(), (std::vector<double>{-1, 0, 4}));
  EXPECT_EQ(t.grad().to_doubles(), (std::vector<double>{1, 0, -4}));
}

// f32 and f64 inputs meet in f64 (PyTorch promotes); each gradient comes back in its input's
// dtype and shape. A weight must broadcast to the loss; batchmean divides by input.size(0).
TEST(Losses, MixedDtypesBroadcastWeightsAndBatchmean) {
  Tensor x = Tensor::from_doubles({1, 2, 3}, {3}, DType::f32);
  x.set_requires_grad(true);
  const Tensor t = leaf({1.5, 2, 1}, {1, 3});
  const Tensor loss = mse_loss(x, t, Reduction::sum);
  EXPECT_EQ(loss.dtype(), DType::f64);
  loss.backward();
  EXPECT_EQ(x.grad().to_doubles(), (std::vector<double>{-1, 0, 4}));
  EXPECT_EQ(t.grad().shape(), (Shape{1, 3}));
  Tensor e = Tensor::from_doubles({2}, {1}, DType::f32);
  e.set_requires_grad(true);
  mixprec::pow(leaf({3}), e).backward();
  EXPECT_NEAR(e.grad().to_doubles()[0], 9 * std::log(3.0), 1e-5);
  const std::string msg = error_of([] {
    binary_cross_entropy_with_logits(leaf({1, 2, 3}), leaf({0, 1, 0}),
                                     leaf({1, 1, 1, 1, 1, 1}, {2, 3}));
  });
  EXPECT_NE(msg.find("weight"), std::string::npos) << msg;
  // input [3] (log-probs), target [2, 3] broadcast: batchmean divides by input.size(0) = 3.
  const Tensor in = leaf({-1, -1, -1}), tg = leaf({0.5, 0.5, 0.5, 0.5, 0.5, 0.5}, {2, 3});
  EXPECT_NEAR(kl_div(in, tg, Reduction::batchmean).item(),
              kl_div(in, tg, Reduction::sum).item() / 3, 1e-15);
}

// l1_loss: sgn(x - t), 0 where they are equal.
TEST(Losses, L1GradientIsZeroWhereInputEqualsTarget) {
  const Tensor x = leaf({1, 2, 3}), t = leaf({1, 3, 2});
  l1_loss(x, t, Reduction::sum).backward();
  EXPECT_EQ(x.grad().to_doubles(), (std::vector<double>{0, -1, 1}));
}

// smooth_l1_loss_backward: -1 at d <= -beta, 1 at d >= beta, d/beta between; the target's
// gradient is the same kernel with the arguments swapped, so at beta = 0 and d = 0 both
// gradients are -1 (torch 1.13, checked).
TEST(Losses, SmoothL1BoundariesAndBetaZero) {
  const Tensor x = leaf({0, 0, 0, 2}), t = leaf({0.5, 0.25, 0, 0});
  const Tensor loss = smooth_l1_loss(x, t, Reduction::none, 0.5);
  EXPECT_EQ(loss.to_doubles(), (std::vector<double>{0.25, 0.0625, 0, 1.75}));
  sum(loss).backward();
  EXPECT_EQ(x.grad().to_doubles(), (std::vector<double>{-1, -0.5, 0, 1}));
  EXPECT_EQ(t.grad().to_doubles(), (std::vector<double>{1, 0.5, 0, -1}));
  const Tensor x0 = leaf({0, 1}), t0 = leaf({0, 3});
  const Tensor l0 = smooth_l1_loss(x0, t0, Reduction::sum, 0.0);
  EXPECT_EQ(l0.item(), 2.0);  // l1
  l0.backward();
  EXPECT_EQ(x0.grad().to_doubles(), (std::vector<double>{-1, -1}));
  EXPECT_EQ(t0.grad().to_doubles(), (std::vector<double>{-1, 1}));
  EXPECT_THROW(smooth_l1_loss(x, t, Reduction::mean, -1.0), Error);
}

// kl_div = xlogy(t, t) - t·input: 0 where t == 0; the target gradient log t + 1 - input is
// NaN at t == 0 (xlogy's t/t, torch 1.13). mean divides by every element, batchmean by N.
TEST(Losses, KlDivXlogyAtZeroAndItsReductions) {
  const Tensor input = leaf({-1, -2, -0.5, -3}, {2, 2}), t = leaf({0, 1, 0.5, 0.5}, {2, 2});
  const std::vector<double> terms = kl_div(input, t, Reduction::none).to_doubles();
  EXPECT_EQ(terms[0], 0.0);
  EXPECT_NEAR(terms[1], 2.0, 1e-15);
  EXPECT_NEAR(terms[2], 0.5 * std::log(0.5) + 0.25, 1e-15);
  const double total = terms[0] + terms[1] + terms[2] + terms[3];
  EXPECT_NEAR(kl_div(input, t, Reduction::sum).item(), total, 1e-15);
  EXPECT_NEAR(kl_div(input, t, Reduction::batchmean).item(), total / 2, 1e-15);
  EXPECT_NEAR(kl_div(input, t).item(), total / 4, 1e-15);
  kl_div(input, t, Reduction::sum).backward();
  EXPECT_EQ(input.grad().to_doubles(), (std::vector<double>{0, -1, -0.5, -0.5}));
  EXPECT_TRUE(std::isnan(t.grad().to_doubles()[0]));
  EXPECT_NEAR(t.grad().to_doubles()[1], 0 + 1 + 2, 1e-15);
  const Tensor lt = leaf({std::log(0.25)});
  EXPECT_NEAR(kl_div(leaf({-1}), lt, Reduction::sum, true).item(), 0.25 * (std::log(0.25) + 1),
              1e-15);
}

// nll_loss with weights [1, 2, 3] and targets [2, 0, ignored, 1], mean: the gradients are
// -3/6, -1/6, 0, -2/6 at the targets (torch 1.13, checked); all ignored gives NaN (mean)
// and 0 (sum), with zero gradients.
TEST(Losses, NllLossWeightsAndIgnoredRows) {
  const Tensor x = leaf({-1, -2, -3, -4, -5, -6, -7, -8, -9, -10, -11, -12}, {4, 3});
  const Tensor w = Tensor::from_doubles({1, 2, 3}, {3}, DType::f64);
  const Tensor t = Tensor::from_vector<int64_t>({2, 0, -100, 1}, {4});
  const Tensor loss = nll_loss(x, t, w);
  EXPECT_NEAR(loss.item(), (3 * 3 + 1 * 4 + 2 * 11) / 6.0, 1e-15);
  loss.backward();
  const std::vector<double> g = x.grad().to_doubles();
  EXPECT_EQ(g, (std::vector<double>{0, 0, -3.0 / 6, -1.0 / 6, 0, 0, 0, 0, 0, 0, -2.0 / 6, 0}));
  const Tensor all = Tensor::from_vector<int64_t>({-100, -100}, {2});
  const Tensor x2 = leaf({-1, -2, -3, -4}, {2, 2});
  const Tensor none_kept = nll_loss(x2, all);
  EXPECT_TRUE(std::isnan(none_kept.item()));
  none_kept.backward();
  EXPECT_EQ(x2.grad().to_doubles(), (std::vector<double>{0, 0, 0, 0}));
  EXPECT_EQ(nll_loss(x2, all, {}, -100, Reduction::sum).item(), 0.0);
  // An ignored row counts nothing, even where its log-probabilities are -inf.
  const Tensor masked = leaf({-INFINITY, -1, -0.5, -2}, {2, 2});
  EXPECT_EQ(nll_loss(masked, Tensor::from_vector<int64_t>({-100, 0}, {2})).item(), 0.5);
  EXPECT_EQ(
      nll_loss(masked, Tensor::from_vector<int64_t>({-100, 0}, {2}), {}, -100, Reduction::none)
          .to_doubles(),
      (std::vector<double>{0, 0.5}));
  const std::string msg = error_of([&] {
    nll_loss(x2, Tensor::from_vector<int64_t>({0, 3}, {2}));
  });
  EXPECT_NE(msg.find("target 3"), std::string::npos) << msg;
  EXPECT_THROW(nll_loss(x2, Tensor::from_vector<int64_t>({0, 1, 1}, {3})), Error);
  // Kept rows whose weights sum to 0 divide by 0 (torch: -inf here), not the all-ignored NaN.
  const Tensor signed_w = Tensor::from_doubles({1, -1}, {2}, DType::f64);
  EXPECT_EQ(
      nll_loss(leaf({-1, -2, -3, -4}, {2, 2}), Tensor::from_vector<int64_t>({0, 1}, {2}), signed_w)
          .item(),
      -INFINITY);
  EXPECT_THROW(nll_loss(x2, Tensor::from_doubles({0, 1}, {2}, DType::f32)), Error);
}

// The logits form is stable where the probability form saturates: at ±800 the loss is 800
// or 0 and the gradients ±1 (torch 1.13, checked).
TEST(Losses, BceWithLogitsIsFiniteAtLargeLogits) {
  const Tensor x = leaf({800, -800}), y = leaf({0, 0});
  const Tensor loss = binary_cross_entropy_with_logits(x, y, {}, {}, Reduction::none);
  EXPECT_EQ(loss.to_doubles(), (std::vector<double>{800, 0}));
  sum(loss).backward();
  EXPECT_EQ(x.grad().to_doubles(), (std::vector<double>{1, 0}));
  EXPECT_EQ(y.grad().to_doubles(), (std::vector<double>{-800, 800}));
  const std::string msg = error_of([&] {
    binary_cross_entropy_with_logits(x, leaf({0, 0, 0}), {}, {}, Reduction::sum);
  });
  EXPECT_NE(msg.find("must be the same as input size"), std::string::npos) << msg;
}

// binary_cross_entropy: each log clamped at -100, so p = 1 with y = 0 costs 100; inputs
// outside [0, 1] are errors; under autocast the op is refused with the logits form named.
TEST(Losses, BceOnProbabilitiesClampsAndIsRefusedUnderAutocast) {
  EXPECT_EQ(binary_cross_entropy(leaf({1}), leaf({0}), {}, Reduction::sum).item(), 100.0);
  EXPECT_EQ(binary_cross_entropy(leaf({1}), leaf({1}), {}, Reduction::sum).item(), 0.0);
  const std::string range = error_of([] { binary_cross_entropy(leaf({1.5}), leaf({1})); });
  EXPECT_NE(range.find("between 0 and 1"), std::string::npos) << range;
  const Tensor p = Tensor::from_doubles({0.25}, {1}, DType::f32);
  std::string refused;
  {
    amp::AutocastGuard guard(DType::bf16);
    refused = error_of([&] { binary_cross_entropy(p, p); });
    EXPECT_TRUE(amp::autocast_enabled());  // the region is still on after the refusal
  }
  EXPECT_NE(refused.find("binary_cross_entropy_with_logits"), std::string::npos) << refused;
  {  // a nested disabled region inside autocast may run it
    amp::AutocastGuard guard(DType::bf16);
    amp::AutocastGuard off(DType::bf16, false);
    EXPECT_NO_THROW(binary_cross_entropy(p, p));
  }
}

// torch 1.13 floors each norm at eps on its own: [1e-5, 0] with itself is 1 (a floor on the
// product of the norms would give 0.01); the floor is outside the gradient, so x1 = 0 gets
// u2 / eps (checked values).
TEST(Losses, CosineSimilarityFloorsEachNormOnItsOwn) {
  EXPECT_NEAR(cosine_similarity(leaf({1e-5, 0}, {1, 2}), leaf({1e-5, 0}, {1, 2})).item(), 1.0,
              1e-12);
  const Tensor a = leaf({1e-9, 0}, {1, 2}), b = leaf({3, 4}, {1, 2});
  const Tensor c = cosine_similarity(a, b);
  EXPECT_NEAR(c.item(), 0.06, 1e-15);
  c.backward();
  EXPECT_NEAR(a.grad().to_doubles()[0], 5.94e7, 1e-6 * 5.94e7);
  EXPECT_NEAR(a.grad().to_doubles()[1], 8e7, 1e-6 * 8e7);
  const Tensor z = leaf({0, 0}, {1, 2}), u = leaf({1, 2}, {1, 2});
  cosine_similarity(z, u).backward();
  EXPECT_NEAR(z.grad().to_doubles()[1], 2 / std::sqrt(5.0) / 1e-8, 1e2);
  EXPECT_EQ(cosine_similarity(Tensor::ones({3, 4}), Tensor::ones({4}), 1).shape(), (Shape{3}));
}

// Low precision: each loss is its f32 computation on the same values, rounded once.
TEST(Losses, Bf16LossesAreTheF32LossesRoundedOnce) {
  const Tensor x = randn({6, 5}, DType::bf16, 1), t = randn({6, 5}, DType::bf16, 2);
  const Tensor x32 = x.to(DType::f32), t32 = t.to(DType::f32);
  EXPECT_TRUE(same_bits(mse_loss(x, t), mse_loss(x32, t32).to(DType::bf16)));
  EXPECT_TRUE(same_bits(smooth_l1_loss(x, t, Reduction::sum),
                        smooth_l1_loss(x32, t32, Reduction::sum).to(DType::bf16)));
  EXPECT_TRUE(same_bits(binary_cross_entropy_with_logits(x, t),
                        binary_cross_entropy_with_logits(x32, t32).to(DType::bf16)));
  EXPECT_TRUE(same_bits(cosine_similarity(x, t), cosine_similarity(x32, t32).to(DType::bf16)));
  const Tensor targets = Tensor::from_vector<int64_t>({0, 4, 2, 1, 3, 3}, {6});
  EXPECT_TRUE(same_bits(nll_loss(x, targets), nll_loss(x32, targets).to(DType::bf16)));
}

}  // namespace
}  // namespace mixprec
