// The gradient scans of the scaler and of clipping against element-by-element references:
// which tensor holds the first bad value, and the unscaled bits (the exact f64 product of
// each element and 1/scale, rounded once into the gradient's dtype).
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
  for (size_t i = 0; i < g.size(); ++i) {
    Tensor one = g[i].clone();
    EXPECT_EQ(cpu::unscale_and_check(one, 1.0f), i == 0 || i == 1 || i == 6) << i;
  }
  // A product that overflows f32 counts in both; one that overflows only the f16 storage
  // counts where it is stored (the read-only test sees the f32 product an optimizer reads).
  std::vector<Tensor> big = gradients();
  poison(big[4], 100000, 60000.0);  // f16: 60000 * 2 is finite in f32, inf in f16
  EXPECT_EQ(cpu::first_nonfinite(big, 2.0f), -1);
  poison(big[7], 65536, 3e38);  // bf16, in the second chunk: 6e38 overflows f32
  EXPECT_EQ(cpu::first_nonfinite(big, 2.0f), 7);
  EXPECT_EQ(cpu::unscale_and_check(big, 2.0f), 4);
}

TEST(GradScan, UnscalingRoundsTheExactProductOnceIntoEachDtype) {
  const float inv = 1.0f / 3.0f;
  std::vector<Tensor> many = gradients();
  EXPECT_EQ(cpu::unscale_and_check(many, inv), -1);
  const std::vector<Tensor> before = gradients();
  for (size_t i = 0; i < many.size(); ++i) {
    std::vector<double> expect = before[i].to_doubles();
    for (double& v : expect) v *= static_cast<double>(inv);  // exact for every dtype but f64
    const Tensor want = Tensor::from_doubles(expect, before[i].shape(), before[i].dtype());
    EXPECT_EQ(many[i].to_doubles(), want.to_doubles()) << i;
    Tensor one = before[i].clone();  // the one-tensor form: the same pass
    EXPECT_FALSE(cpu::unscale_and_check(one, inv));
    EXPECT_EQ(one.to_doubles(), want.to_doubles()) << i;
  }
}

}  // namespace
}  // namespace mixprec
