// The bf16 kernels' table: what a host has, switching between them, timing them.
#include "mixprec/cpu/bf16_kernel.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "mixprec/core/error.h"
#include "mixprec/cpu/gemm.h"

namespace mixprec::cpu {
namespace {

using ::testing::HasSubstr;

class KeepKernel : public ::testing::Test {
 protected:
  void TearDown() override { use_bf16_kernel(before_, "test"); }
  std::string before_ = current_bf16_kernel();
};

TEST_F(KeepKernel, WidenedIsAlwaysThereAndLast) {
  const std::vector<std::string> here = available_bf16_kernels();
  ASSERT_FALSE(here.empty());
  EXPECT_EQ(here.back(), "widened");
  EXPECT_EQ(current_bf16_kernel(), here.front()) << "before any choice, the table's order";
}

TEST_F(KeepKernel, EachAvailableKernelBecomesCurrentAndDecidesNativeProducts) {
  for (const std::string& k : available_bf16_kernels()) {
    use_bf16_kernel(k, "test");
    EXPECT_EQ(current_bf16_kernel(), k);
    EXPECT_EQ(bf16_gemm_is_native(), k != "widened") << k;
  }
}

TEST_F(KeepKernel, UnknownOrMissingKernelIsRefusedNamingWhatTheHostHas) {
  try {
    use_bf16_kernel("tensor-cores", "training.bf16_kernel");
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("training.bf16_kernel"));
    EXPECT_THAT(e.what(), HasSubstr("'tensor-cores'"));
    EXPECT_THAT(e.what(), HasSubstr("widened"));
  }
  for (const Bf16Kernel& k : bf16_kernels()) {
    if (k.hardware()) continue;
    try {
      use_bf16_kernel(k.name, "training.bf16_kernel");
      FAIL() << k.name;
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("not available on this host"));
    }
    EXPECT_EQ(current_bf16_kernel(), before_) << "a refused kernel changes nothing";
  }
}

TEST_F(KeepKernel, TimingCoversEveryKernelAndLeavesTheCurrentOne) {
  const std::vector<std::string> here = available_bf16_kernels();
  use_bf16_kernel("widened", "test");
  const std::vector<Bf16KernelTiming> t = time_bf16_kernels(1);
  ASSERT_EQ(t.size(), here.size());
  for (size_t i = 0; i < t.size(); ++i) {
    EXPECT_EQ(t[i].kernel, here[i]);
    EXPECT_GT(t[i].gflops, 0.0);
    EXPECT_LE(t[i].gflops_min, t[i].gflops);
    EXPECT_GE(t[i].gflops_max, t[i].gflops);
  }
  EXPECT_EQ(current_bf16_kernel(), "widened");
}

}  // namespace
}  // namespace mixprec::cpu
