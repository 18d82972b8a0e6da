// Parameter: master and working copy rounded once from the initial values, one tensor when
// the dtypes agree, gradients in the reduce dtype, refresh = master rounded to nearest even.
#include <gtest/gtest.h>

#include <cmath>

#include "mixprec/ops.h"
#include "optim_testing.h"

namespace mixprec::optim {
namespace {

using mixprec::testing::randn;
using mixprec::testing::same_bits;
using testing::make_policy;
using testing::pure;

TEST(Parameter, Fp32PolicyKeepsOneTensor) {
  const Tensor init = randn({4, 3}, DType::f32, 1);
  Parameter p("w", init, make_policy(DType::f32));
  EXPECT_FALSE(p.has_working_copy());
  EXPECT_TRUE(p.value().shares_storage_with(p.master()));
  EXPECT_TRUE(p.value().requires_grad());
  EXPECT_TRUE(same_bits(p.master(), init));
  EXPECT_FALSE(p.master().shares_storage_with(init));  // a copy, not the caller's tensor
}

TEST(Parameter, MixedPolicyRoundsInitIntoEachCopy) {
  const Tensor init = randn({5, 7}, DType::f32, 2);
  Parameter p("w", init, make_policy(DType::bf16));
  EXPECT_TRUE(p.has_working_copy());
  EXPECT_EQ(p.master().dtype(), DType::f32);
  EXPECT_EQ(p.value().dtype(), DType::bf16);
  EXPECT_TRUE(same_bits(p.master(), init));
  EXPECT_TRUE(same_bits(p.value(), init.to(DType::bf16)));
}

TEST(Parameter, WorkingCopyIsTheMasterRoundedEvenFromAnF64Init) {
  // 1 + 2^-8 + 2^-30: straight to bf16 it would round up to 1 + 2^-7, but the master (f32)
  // loses the 2^-30 and the tie then goes to even, 1. The working copy is always the master
  // rounded, so a run restarted from its masters has the same working copies.
  const Tensor init = Tensor::from_vector(std::vector<double>{1 + 0x1p-8 + 0x1p-30});
  Parameter p("w", init, make_policy(DType::bf16));
  EXPECT_EQ(p.master().item(), static_cast<double>(static_cast<float>(1 + 0x1p-8 + 0x1p-30)));
  EXPECT_EQ(p.value().item(), 1.0);
}

TEST(Parameter, PureBf16MasterIsTheWorkingCopy) {
  Parameter p("w", randn({3, 3}, DType::f32, 3), pure(DType::bf16, amp::MasterUpdate::kahan));
  EXPECT_EQ(p.master().dtype(), DType::bf16);
  EXPECT_FALSE(p.has_working_copy());
}

TEST(Parameter, GradientAccumulatesInTheReduceDtype) {
  for (DType reduce : {DType::f32, DType::bf16}) {
    Parameter p("w", randn({4}, DType::f32, 4), make_policy(DType::bf16, reduce));
    sum(p.value()).backward();
    ASSERT_TRUE(p.grad().defined());
    EXPECT_EQ(p.grad().dtype(), reduce);
    EXPECT_EQ(p.grad().to_doubles(), std::vector<double>(4, 1.0));
    p.zero_grad();
    EXPECT_FALSE(p.grad().defined());
  }
}

TEST(Parameter, RefreshRoundsTheMasterToNearestEven) {
  Parameter p("w", Tensor::zeros({3}), make_policy(DType::bf16));
  // 1 + 2^-8 is a tie between 1 and 1 + 2^-7 (even: 1); 1 + 3 * 2^-8 ties to 1 + 2^-6.
  float* m = p.master().data<float>();
  m[0] = 1 + 0x1p-8f;
  m[1] = 1 + 3 * 0x1p-8f;
  m[2] = -2.5f;
  p.refresh();
  EXPECT_EQ(p.value().to_doubles(), (std::vector<double>{1.0, 1 + 0x1p-6, -2.5}));
}

TEST(Parameter, BadInputsThrowNamingTheParameter) {
  const Tensor init = randn({6, 4}, DType::f32, 5);
  try {
    Parameter("attn.q", init, make_policy(DType::bf16), ParamRole{.heads = 4});
    FAIL() << "4 heads cannot split 6 rows";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("attn.q"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Parameter("w", init, pure(DType::f8_e4m3fn, amp::MasterUpdate::nearest)), Error);
  EXPECT_THROW(Parameter("w", Tensor(), make_policy(DType::bf16)), Error);
}

}  // namespace
}  // namespace mixprec::optim
