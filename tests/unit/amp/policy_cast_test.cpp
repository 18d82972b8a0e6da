// The policy casts against jmp's Policy.cast_to_param / cast_to_compute / cast_to_output
// (jmp/_src/policy.py, _cast_floating_to): floating tensors take the policy's dtype, integer
// and bool tensors are left alone, over a tensor, a list and a map; the casts keep autograd.
#include "mixprec/amp/policy_cast.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "mixprec/ops.h"
#include "mixprec/optim/parameter.h"

namespace mixprec::amp {
namespace {

TEST(PolicyCast, FloatingTensorsTakeThePolicysDtypesAndIntegersStay) {
  const MixedPrecisionPolicy p = parse_policy("p=f32,c=bf16,o=f16");
  const Tensor x = Tensor::from_vector(std::vector<float>{1.0f, 1.00390625f, -3.0f});
  const Tensor ids = Tensor::from_vector(std::vector<int64_t>{3, 1});
  const Tensor mask = Tensor::full({2}, 1.0, DType::boolean);
  EXPECT_EQ(cast_to_compute(p, x).dtype(), DType::bf16);
  EXPECT_EQ(cast_to_compute(p, x).to_doubles(), (std::vector<double>{1.0, 1.0, -3.0}));  // RNE
  EXPECT_EQ(cast_to_output(p, x).dtype(), DType::f16);
  EXPECT_EQ(cast_to_param(p, x.to(DType::f64)).dtype(), DType::f32);
  EXPECT_EQ(cast_to_compute(p, Tensor::full({2}, 1.5, DType::f8_e4m3fn)).dtype(), DType::bf16);
  EXPECT_TRUE(cast_to_compute(p, ids).shares_storage_with(ids));
  EXPECT_TRUE(cast_to_compute(p, mask).shares_storage_with(mask));
  EXPECT_TRUE(cast_to_param(p, x).shares_storage_with(x));  // already f32: no copy

  const std::vector<Tensor> list = cast_to_compute(p, std::vector<Tensor>{x, ids});
  EXPECT_EQ(list[0].dtype(), DType::bf16);
  EXPECT_EQ(list[1].dtype(), DType::i64);
  const TensorMap map = cast_to_output(p, TensorMap{{"x", x}, {"ids", ids}});
  EXPECT_EQ(map.at("x").dtype(), DType::f16);
  EXPECT_EQ(map.at("ids").dtype(), DType::i64);
}

TEST(PolicyCast, AParameterSetCastsToComputeAndGradientsFlowBack) {
  const MixedPrecisionPolicy p = parse_policy("p=f32,c=bf16");
  optim::ParamList params{std::make_shared<optim::Parameter>("w", Tensor::full({3}, 0.5), p),
                          std::make_shared<optim::Parameter>("b", Tensor::full({3}, 2.0), p)};
  const TensorMap cast = cast_to_compute(p, optim::parameter_values(params));
  ASSERT_EQ(cast.size(), 2u);
  EXPECT_EQ(cast.at("w").dtype(), DType::bf16);
  sum(mul(cast.at("w"), cast.at("b"))).backward();
  ASSERT_TRUE(params[0]->grad().defined());
  EXPECT_EQ(params[0]->grad().dtype(), DType::f32);  // back through the cast
  EXPECT_EQ(params[0]->grad().to_doubles(), (std::vector<double>{2.0, 2.0, 2.0}));
}

}  // namespace
}  // namespace mixprec::amp
