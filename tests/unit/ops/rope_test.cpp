// rope (rotate-half): f64 gradient checks, a naive f64 reference, low precision vs the f32
// kernel on the same rounded inputs, thread-count independence, bad input.
#include <gtest/gtest.h>

#include <cmath>

#include "mixprec/ops/attention.h"
#include "support/op_testing.h"

namespace mixprec {
namespace {

using namespace testing;  // mixprec::testing, the op-test support

// out = x·cos + rotate_half(x)·sin, angles (offset + t)·theta^(-2i/Dh), all in f64.
Tensor naive_rope(const Tensor& x, double theta, int64_t offset, bool inverse = false) {
  const int64_t T = x.size(2), D = x.size(3), half = D / 2;
  const std::vector<double> in = x.to_doubles();
  std::vector<double> out(in.size());
  for (size_t row = 0; row < in.size() / D; ++row) {
    const double pos = static_cast<double>(offset + static_cast<int64_t>(row) % T);
    for (int64_t i = 0; i < D; ++i) {
      const double angle = pos * std::pow(theta, -2.0 * static_cast<double>(i % half) / D);
      const double rot = i < half ? -in[row * D + i + half] : in[row * D + i - half];
      const double s = inverse ? -std::sin(angle) : std::sin(angle);
      out[row * D + i] = in[row * D + i] * std::cos(angle) + rot * s;
    }
  }
  return Tensor::from_doubles(out, x.shape(), DType::f64);
}

TEST(Rope, GradcheckF64) {
  expect_gradcheck([](const std::vector<Tensor>& in) { return rope(in[0]); },
                   {grad_input({2, 3, 7, 10}, 1)}, "rope [2,3,7,10]");
  expect_gradcheck([](const std::vector<Tensor>& in) { return rope(in[0], 500.0, 13); },
                   {grad_input({1, 2, 5, 6}, 2)}, "rope theta 500, offset 13");
  expect_gradcheck([](const std::vector<Tensor>& in) { return rope(in[0], 10000.0, 3); },
                   {grad_input({1, 1, 4, 2}, 3)}, "rope Dh 2");
}

TEST(Rope, MatchesNaiveF64Reference) {
  const Tensor x = randn({2, 3, 37, 16}, DType::f64, 11);
  expect_close(rope(x), naive_rope(x, 10000.0, 0), 1e-15, 1e-14, "f64");
  // Angles near 1000 rad: their own f64 rounding (~1e-13) shows up in the result.
  expect_close(rope(x, 100.0, 1000), naive_rope(x, 100.0, 1000), 1e-12, 1e-12,
               "f64 theta 100, offset 1000");
  // Position 0 is the identity.
  const Tensor x1 = randn({1, 2, 1, 8}, DType::f32, 12);
  EXPECT_TRUE(same_bits(rope(x1), x1));
  // f32: cos/sin rounded to f32 (half an ulp), two products and a sum.
  const Tensor xf = randn({2, 3, 37, 16}, DType::f32, 13);
  expect_close(rope(xf, 10000.0, 5), naive_rope(xf, 10000.0, 5), 1e-6, 4e-7 * 4, "f32");
}

TEST(Rope, BackwardIsInverseRotation) {
  Tensor x = randn({2, 2, 9, 12}, DType::f64, 21).set_requires_grad(true, DType::f64);
  const Tensor g = randn({2, 2, 9, 12}, DType::f64, 22);
  rope(x, 10000.0, 4).backward(g);
  expect_close(x.grad(), naive_rope(g, 10000.0, 4, true), 1e-15, 1e-14, "grad");
  // Rotations keep norms: |rope(x)| == |x| per row pair.
  const std::vector<double> a = rope(x.detach(), 10000.0, 4).to_doubles(), b = x.to_doubles();
  double na = 0, nb = 0;
  for (size_t i = 0; i < a.size(); ++i) na += a[i] * a[i], nb += b[i] * b[i];
  EXPECT_NEAR(na, nb, 1e-10 * nb);
}

TEST(Rope, LowPrecisionMatchesF32KernelOnRoundedInputs) {
  for (DType dt : {DType::bf16, DType::f16}) {
    const Tensor x = randn({2, 3, 33, 64}, dt, 31), g = randn({2, 3, 33, 64}, dt, 32);
    Tensor xl = x.detach().set_requires_grad(true, dt);
    Tensor xf = x.to(DType::f32).set_requires_grad(true, DType::f32);
    Tensor yl = rope(xl, 10000.0, 7), yf = rope(xf, 10000.0, 7);
    // The same f32 math on the same values, rounded once.
    EXPECT_TRUE(same_bits(yl, yf.to(dt))) << dtype_name(dt);
    yl.backward(g);
    yf.backward(g.to(DType::f32));
    EXPECT_EQ(xl.grad().dtype(), dt);
    EXPECT_TRUE(same_bits(xl.grad(), xf.grad().to(dt))) << dtype_name(dt) << " grad";
    // An f32 gradient into the low-precision op: rotated in f32 and rounded once.
    Tensor xl2 = x.detach().set_requires_grad(true, dt);
    const Tensor g32 = randn({2, 3, 33, 64}, DType::f32, 33);
    rope(xl2, 10000.0, 7).backward(g32);
    Tensor xf2 = x.to(DType::f32).set_requires_grad(true, DType::f32);
    rope(xf2, 10000.0, 7).backward(g32);
    EXPECT_TRUE(same_bits(xl2.grad(), xf2.grad().to(dt))) << dtype_name(dt) << " f32 grad";
  }
}

TEST(Rope, SameBitsWithOneAndTwoThreads) {
  for (DType dt : {DType::f32, DType::bf16}) {
    const Tensor x = randn({4, 4, 128, 64}, dt, 41), g = randn({4, 4, 128, 64}, dt, 42);
    auto run = [&] {
      Tensor xi = x.detach().set_requires_grad(true, dt);
      Tensor y = rope(xi, 10000.0, 3);
      y.backward(g);
      return std::pair{y.detach(), xi.grad()};
    };
    const auto one = with_threads(1, run), two = with_threads(2, run);
    EXPECT_TRUE(same_bits(one.first, two.first)) << dtype_name(dt);
    EXPECT_TRUE(same_bits(one.second, two.second)) << dtype_name(dt) << " grad";
  }
}

TEST(Rope, BadInput) {
  EXPECT_THROW(rope(randn({1, 2, 5, 7}, DType::f32, 51)), Error);  // odd Dh
  EXPECT_THROW(rope(randn({1, 2, 5, 1}, DType::f32, 52)), Error);
  EXPECT_THROW(rope(randn({2, 5, 8}, DType::f32, 53)), Error);  // not [B, H, T, Dh]
  EXPECT_THROW(rope(Tensor::zeros({1, 1, 2, 4}, DType::i64)), Error);
  const Tensor x = randn({1, 1, 3, 4}, DType::f32, 54);
  EXPECT_THROW(rope(x, 0.0), Error);
  EXPECT_THROW(rope(x, -5.0), Error);
  EXPECT_THROW(rope(x, 10000.0, -1), Error);
  EXPECT_THROW(rope(Tensor()), Error);
}

}  // namespace
}  // namespace mixprec
