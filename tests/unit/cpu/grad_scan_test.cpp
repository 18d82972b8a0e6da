// The gradient scans of the scaler and of clipping against element-by-element references:
// which tensor holds the first bad value, and the unscaled bits (the exact f64 product of
// each element and 1/scale, rounded once into the gradient's dtype).
#include "mixprec/cpu/grad_scan.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "mixprec/amp/policy.h"
#include "mixprec/optim/clip.h"
#include "mixprec/optim/parameter.h"
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

// The monitor's one-pass statistics against an element-by-element f64 reference, and its sum
// of squares against optim::grad_norm's bits (over the gradient dtypes optimizers read).
TEST(GradScan, NumericsOfManyTensorsMatchAnElementwiseReferenceAndTheClippingNorm) {
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<Tensor> g = gradients();
  const double scale = 512, under = 1e-3, over = 5e3;  // thresholds on |g * scale|
  for (const bool with_bad : {false, true}) {
    if (with_bad) {
      poison(g[1], 70000, inf);
      poison(g[4], 3, std::nan(""));
    }
    const cpu::GradNumericsPass pass = cpu::grad_numerics(g, scale, under, over);
    ASSERT_EQ(pass.per_tensor.size(), g.size());
    double all = 0;
    for (std::size_t t = 0; t < g.size(); ++t) {
      cpu::GradNumerics ref;
      for (double v : g[t].to_doubles()) {
        ++ref.numel;
        if (!std::isfinite(v)) {
          ++ref.nonfinite;
          continue;
        }
        const double a = std::fabs(v);
        ref.amax = std::max(ref.amax, static_cast<float>(a));
        ref.underflow += a * scale < under;
        ref.overflow += a * scale > over;
        ref.sum_squares += a * a;
      }
      const cpu::GradNumerics& got = pass.per_tensor[t];
      EXPECT_EQ(got.numel, ref.numel) << t;
      EXPECT_EQ(got.nonfinite, ref.nonfinite) << t;
      EXPECT_EQ(got.amax, ref.amax) << t;
      EXPECT_EQ(got.underflow, ref.underflow) << t;
      EXPECT_EQ(got.overflow, ref.overflow) << t;
      EXPECT_NEAR(got.sum_squares, ref.sum_squares, 1e-12 * ref.sum_squares) << t;
      all += got.sum_squares;
      EXPECT_EQ(cpu::grad_numerics(g[t], scale, under, over).sum_squares, got.sum_squares) << t;
    }
    EXPECT_NEAR(pass.sum_squares, all, 1e-12 * all);
  }
  // Finite f32, bf16 and f16 gradients (what optimizers read): the clipping norm's bits.
  std::vector<std::shared_ptr<optim::Parameter>> params;
  std::vector<Tensor> read;
  for (const Tensor& t : gradients()) {
    if (t.dtype() == DType::f64) continue;
    amp::MixedPrecisionPolicy policy;
    policy.reduce_dtype = t.dtype();
    std::string name = "p";
    name += std::to_string(params.size());  // (GCC 12's -Wrestrict misfires on "p" + ...)
    auto p = std::make_shared<optim::Parameter>(name, Tensor::zeros(t.shape()), policy);
    p->set_grad(t);
    params.push_back(p);
    read.push_back(t);
  }
  const double norm = std::sqrt(cpu::grad_numerics(read, 1.0, 0.0, inf).sum_squares);
  EXPECT_EQ(norm, optim::grad_norm(params));
}

}  // namespace
}  // namespace mixprec
