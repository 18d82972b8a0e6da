// The many-tensor gradient scans against the one-tensor ones they replace in the scaler and in
// clipping: the same first bad tensor, the same unscaled bits.
#include "mixprec/cpu/grad_scan.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "mixprec/tensor/generator.h"
#include "mixprec/tensor/tensor.h"

namespace mixprec {
namespace {

// Tensors of every gradient dtype, some far longer than one scan chunk (65536), some tiny.
std::vector<Tensor> gradients() {
  Generator gen(11);
  const std::vector<std::pair<int64_t, DType>> specs = {
      {5, DType::f32},      {200000, DType::f32}, {70000, DType::bf16}, {1, DType::f16},
      {131072, DType::f16}, {3, DType::f64},      {65536, DType::f32},  {65537, DType::bf16}};
  std::vector<Tensor> out;
  for (const auto& [n, dt] : specs) out.push_back(Tensor::uniform({n}, -100, 100, gen).to(dt));
  return out;
}

void poison(Tensor& t, int64_t at, double value) {
  std::vector<double> v = t.to_doubles();
  v[static_cast<size_t>(at)] = value;
  t = Tensor::from_doubles(v, t.shape(), t.dtype());
}

TEST(GradScan, ManyTensorsFindTheFirstTensorWithABadValue) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  std::vector<Tensor> g = gradients();
  EXPECT_EQ(cpu::first_nonfinite(g), -1);
  poison(g[6], 65535, inf);   // the last element of a one-chunk tensor
  poison(g[1], 199999, nan);  // the last element of the last chunk of a long one
  EXPECT_EQ(cpu::first_nonfinite(g), 1);
  poison(g[0], 0, -inf);
  EXPECT_EQ(cpu::first_nonfinite(g), 0);
  for (size_t i = 0; i < g.size(); ++i)
    EXPECT_EQ(cpu::has_nonfinite(g[i]), i == 0 || i == 1 || i == 6) << i;
  // A product that overflows f32 counts in both; one that overflows only the f16 storage
  // counts where it is stored (the read-only test sees the f32 product an optimizer reads).
  std::vector<Tensor> big = gradients();
  poison(big[4], 100000, 60000.0);  // f16: 60000 * 2 is finite in f32, inf in f16
  EXPECT_EQ(cpu::first_nonfinite(big, 2.0f), -1);
  poison(big[7], 65536, 3e38);  // bf16, in the second chunk: 6e38 overflows f32
  EXPECT_EQ(cpu::first_nonfinite(big, 2.0f), 7);
  EXPECT_EQ(cpu::unscale_and_check(big, 2.0f), 4);
}

TEST(GradScan, ManyTensorsUnscaleToTheOneTensorBits) {
  std::vector<Tensor> many = gradients(), one = gradients();
  EXPECT_EQ(cpu::unscale_and_check(many, 1.0f / 3.0f), -1);
  for (size_t i = 0; i < one.size(); ++i) {
    EXPECT_FALSE(cpu::unscale_and_check(one[i], 1.0f / 3.0f));
    EXPECT_EQ(many[i].to_doubles(), one[i].to_doubles()) << i;
    EXPECT_NE(many[i].to_doubles(), gradients()[i].to_doubles()) << i;  // it did write
  }
}

}  // namespace
}  // namespace mixprec
