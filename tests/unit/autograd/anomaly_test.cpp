// Anomaly mode names the first op, forward or backward, that produces an inf or NaN.
#include "mixprec/autograd/anomaly.h"

#include <gtest/gtest.h>

#include <cmath>

#include "mixprec/ops.h"
#include "support/op_testing.h"

namespace mixprec {
namespace {

TEST(AnomalyMode, NamesTheFirstForwardOpWithANonFiniteOutput) {
  Tensor x = Tensor::full({2, 3}, 1e30).set_requires_grad(true);
  AnomalyModeGuard guard;
  Tensor y = mul(x, x);  // 1e60 overflows f32: inf
  Tensor z = sum(y);     // also inf, but not first
  const AnomalyRecord& r = first_anomaly();
  ASSERT_TRUE(r.found);
  EXPECT_FALSE(r.backward);
  EXPECT_NE(r.op.find("Mul"), std::string::npos) << r.op;
  EXPECT_NE(r.detail.find("6 non-finite values"), std::string::npos) << r.detail;
}

TEST(AnomalyMode, NamesTheFirstBackwardNodeWithANonFiniteGradient) {
  // Finite forward (4e30); a 1e30 seed times the 1e30 scale overflows f32 in ScaleBackward.
  Tensor x = Tensor::ones({4}).set_requires_grad(true);
  AnomalyModeGuard guard;
  Tensor y = sum(scale(x, 1e30));
  EXPECT_FALSE(first_anomaly().found);
  y.backward(Tensor::full({}, 1e30));
  const AnomalyRecord& r = first_anomaly();
  ASSERT_TRUE(r.found);
  EXPECT_TRUE(r.backward);
  EXPECT_EQ(r.op, "ScaleBackward");
  EXPECT_NE(r.detail.find("gradient 0 [4] f32: 4 non-finite values"), std::string::npos)
      << r.detail;
}

TEST(AnomalyMode, OffByDefaultAndThrowsWhenAsked) {
  EXPECT_FALSE(anomaly_mode_enabled());
  Tensor x = Tensor::full({2}, 1e30).set_requires_grad(true);
  Tensor y = mul(x, x);  // nothing recorded without the guard
  {
    AnomalyModeGuard guard(/*throw_on_first=*/true);
    EXPECT_TRUE(anomaly_mode_enabled());
    EXPECT_FALSE(first_anomaly().found);
    EXPECT_THROW(mul(x, x), Error);
  }
  EXPECT_FALSE(anomaly_mode_enabled());
}

TEST(AnomalyMode, Fp8OutputsAreNotScannedAndDoNotThrow) {
  Tensor w = Tensor::full({4}, 0.5).set_requires_grad(true);
  AnomalyModeGuard guard(/*throw_on_first=*/true);
  EXPECT_NO_THROW(w.to(DType::f8_e4m3fn));
  EXPECT_FALSE(first_anomaly().found);
}

}  // namespace
}  // namespace mixprec
