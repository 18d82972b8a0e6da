// PyTorch's autocast op lists as mixprec's torch_cuda and torch_cpu tables, op by op against
// what torch.autocast documents and aten/src/ATen/autocast_mode.{h,cpp} register (each
// expectation spelled out here, not read from the table), and the policy key that selects them.
#include <gtest/gtest.h>

#include "mixprec/amp/autocast.h"
#include "mixprec/amp/policy.h"
#include "mixprec/ops.h"
#include "support/op_testing.h"

namespace mixprec::amp {
namespace {

using mixprec::testing::randn;

constexpr DType bf16 = DType::bf16, f32 = DType::f32;

Tensor positive(DType d) {
  std::vector<double> v = randn({4, 8}, f32, 40).to_doubles();
  for (double& e : v) e = std::fabs(e) + 0.1;
  return Tensor::from_doubles(v, {4, 8}, d);
}

// torch.sqrt, torch.tanh and torch.mean are in neither of PyTorch's fp32 lists: a bf16 input
// stays bf16 under torch.autocast on CUDA and on CPU. mixprec's own table runs them in f32.
TEST(AutocastTorchTables, SqrtTanhAndMeanKeepTheirInputDtypeAsPyTorch) {
  const Tensor x = positive(bf16);
  for (const AutocastOpTable table : {AutocastOpTable::torch_cuda, AutocastOpTable::torch_cpu}) {
    AutocastGuard guard(bf16, AutocastOptions{.op_table = table});
    EXPECT_EQ(mixprec::sqrt(x).dtype(), bf16);
    EXPECT_EQ(mixprec::tanh(x).dtype(), bf16);
    EXPECT_EQ(mixprec::mean(x).dtype(), bf16);
  }
  AutocastGuard guard(bf16);
  EXPECT_EQ(mixprec::sqrt(x).dtype(), f32);
  EXPECT_EQ(mixprec::tanh(x).dtype(), f32);
  EXPECT_EQ(mixprec::mean(x).dtype(), f32);
}

// CUDA: torch.softmax, torch.sum, torch.exp, torch.nn.functional.layer_norm autocast to f32;
// CPU: none of them is in the CPU fp32 list, so a bf16 input stays bf16.
TEST(AutocastTorchTables, CudaRunsSoftmaxAndSumInF32AndCpuDoesNot) {
  const Tensor x = positive(bf16);
  const Tensor w = Tensor::full({8}, 1.0, bf16), b = Tensor::full({8}, 0.0, bf16);
  {
    AutocastGuard guard(bf16, AutocastOptions{.op_table = AutocastOpTable::torch_cuda});
    EXPECT_EQ(softmax(x, -1).dtype(), f32);
    EXPECT_EQ(mixprec::sum(x).dtype(), f32);
    EXPECT_EQ(mixprec::exp(x).dtype(), f32);
    EXPECT_EQ(layernorm(x, w, b).dtype(), f32);
  }
  {
    AutocastGuard guard(bf16, AutocastOptions{.op_table = AutocastOpTable::torch_cpu});
    EXPECT_EQ(softmax(x, -1).dtype(), bf16);
    EXPECT_EQ(mixprec::sum(x).dtype(), bf16);
    EXPECT_EQ(mixprec::exp(x).dtype(), bf16);
    EXPECT_EQ(layernorm(x, w, b).dtype(), bf16);
  }
}

// torch.nn.functional.cross_entropy runs in f32 on both (CPU: cross_entropy_loss; CUDA: its
// log_softmax and nll_loss); torch.mv is in the CUDA lower-precision list only.
TEST(AutocastTorchTables, LossesInF32AndMvLowerOnlyOnCuda) {
  const Tensor logits = randn({4, 10}, bf16, 41);
  const Tensor targets = Tensor::from_vector(std::vector<int64_t>{1, 0, 9, 3});
  const Tensor m = randn({4, 8}, f32, 42), v = randn({8}, f32, 43);
  {
    AutocastGuard guard(bf16, AutocastOptions{.op_table = AutocastOpTable::torch_cuda});
    EXPECT_EQ(cross_entropy(logits, targets).dtype(), f32);
    EXPECT_EQ(mv(m, v).dtype(), bf16);
    EXPECT_EQ(linear(m, randn({3, 8}, f32, 44)).dtype(), bf16);
  }
  {
    AutocastGuard guard(bf16, AutocastOptions{.op_table = AutocastOpTable::torch_cpu});
    EXPECT_EQ(cross_entropy(logits, targets).dtype(), f32);
    EXPECT_EQ(mv(m, v).dtype(), f32);
    EXPECT_EQ(linear(m, randn({3, 8}, f32, 44)).dtype(), bf16);
  }
}

// torch.dot is in PyTorch's promote list: dot(f16, f32) under autocast is f32, in every table.
TEST(AutocastTorchTables, DotPromotesAsPyTorch) {
  const Tensor a = randn({8}, DType::f16, 45), b = randn({8}, f32, 46);
  for (const AutocastOpTable table :
       {AutocastOpTable::mixprec, AutocastOpTable::torch_cuda, AutocastOpTable::torch_cpu}) {
    AutocastGuard guard(DType::f16, AutocastOptions{.op_table = table});
    EXPECT_EQ(dot(a, b).dtype(), f32);
  }
}

// An inner guard without a table keeps the outer one's; with one, it replaces it.
TEST(AutocastTorchTables, InnerGuardsInheritTheTable) {
  const Tensor x = positive(bf16);
  AutocastGuard outer(bf16, AutocastOptions{.op_table = AutocastOpTable::torch_cpu});
  {
    AutocastGuard inner(bf16, AutocastOptions{.fp32_ops = {"exp"}});
    EXPECT_EQ(softmax(x, -1).dtype(), bf16);
    EXPECT_EQ(mixprec::exp(x).dtype(), f32);
  }
  {
    AutocastGuard inner(bf16, AutocastOptions{.op_table = AutocastOpTable::mixprec});
    EXPECT_EQ(softmax(x, -1).dtype(), f32);
  }
}

TEST(AutocastTorchTables, PolicyKeySelectsTheTable) {
  const MixedPrecisionPolicy p = parse_policy("params=bf16,compute=bf16,autocast_ops=torch_cuda");
  EXPECT_EQ(p.autocast_ops, AutocastOpTable::torch_cuda);
  EXPECT_EQ(parse_policy(to_string(p)), p);
  EXPECT_EQ(preset("bf16-mixed").autocast_ops, AutocastOpTable::mixprec);
  try {
    parse_policy("compute=bf16,autocast_ops=torch_xla");
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'torch_xla'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("torch_cuda"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mixprec::amp
