// rmsnorm / layernorm: f64 gradient checks, the f64 forward against plain loops, low precision
// against the f64 math on the same rounded inputs and against the f32 kernel, large offsets,
// thread-count independence (weight/bias gradients are reductions over rows), bad input.
#include "mixprec/ops/normalization.h"

#include <gtest/gtest.h>

#include <cmath>

#include "support/op_testing.h"

namespace mixprec {
namespace {

using namespace testing;  // mixprec::testing, the op-test support

// Plain f64 loops: x [rows, D] (last dim), w and b [D] or undefined.
Tensor reference(const Tensor& x, const Tensor& w, const Tensor& b, double eps, bool center) {
  const std::vector<double> v = x.to_doubles();
  const std::vector<double> wv = w.defined() ? w.to_doubles() : std::vector<double>();
  const std::vector<double> bv = b.defined() ? b.to_doubles() : std::vector<double>();
  const auto D = static_cast<size_t>(x.size(-1));
  std::vector<double> y(v.size());
  for (size_t r = 0; r < v.size() / D; ++r) {
    const double* row = v.data() + r * D;
    double mean = 0, var = 0;
    if (center) {
      for (size_t i = 0; i < D; ++i) mean += row[i];
      mean /= static_cast<double>(D);
    }
    for (size_t i = 0; i < D; ++i) var += (row[i] - mean) * (row[i] - mean);
    const double rstd = 1.0 / std::sqrt(var / static_cast<double>(D) + eps);
    for (size_t i = 0; i < D; ++i)
      y[r * D + i] =
          (row[i] - mean) * rstd * (wv.empty() ? 1.0 : wv[i]) + (bv.empty() ? 0.0 : bv[i]);
  }
  return Tensor::from_doubles(y, x.shape(), DType::f64);
}

Tensor norm(bool center, const Tensor& x, const Tensor& w, const Tensor& b, double eps = 1e-5) {
  return center ? layernorm(x, w, b, eps) : rmsnorm(x, w, eps);
}

TEST(Normalization, Gradcheck) {
  auto rms = [](const std::vector<Tensor>& in) { return rmsnorm(in[0], in[1], 1e-5); };
  auto ln = [](const std::vector<Tensor>& in) { return layernorm(in[0], in[1], in[2], 1e-5); };
  expect_gradcheck(rms, {grad_input({2, 3, 7}, 1), grad_input({7}, 2)}, "rmsnorm");
  expect_gradcheck([](const std::vector<Tensor>& in) { return rmsnorm(in[0], Tensor(), 1e-5); },
                   {grad_input({4, 6}, 3)}, "rmsnorm without weight");
  expect_gradcheck(ln, {grad_input({2, 3, 7}, 4), grad_input({7}, 5), grad_input({7}, 6)},
                   "layernorm");
  expect_gradcheck(
      [](const std::vector<Tensor>& in) { return layernorm(in[0], Tensor(), Tensor(), 1e-5); },
      {grad_input({4, 6}, 7)}, "layernorm without affine");
  expect_gradcheck(
      [](const std::vector<Tensor>& in) { return layernorm(in[0], in[1], Tensor(), 0.1); },
      {grad_input({3, 5}, 8), grad_input({5}, 9)}, "layernorm weight only, eps 0.1");
  // A single-element row: layernorm's output is the bias, rmsnorm's is sign(x) * w.
  expect_gradcheck(ln, {grad_input({3, 1}, 10), grad_input({1}, 11), grad_input({1}, 12)},
                   "layernorm D=1");
  // Only x, or only the weight, needing a gradient.
  Tensor w = randn({7}, DType::f64, 13);
  expect_gradcheck(rms, {grad_input({3, 7}, 14), w}, "rmsnorm dx only");
  expect_gradcheck(rms, {randn({3, 7}, DType::f64, 15), grad_input({7}, 16)}, "rmsnorm dw only");
}

TEST(Normalization, F64MatchesPlainLoops) {
  const Tensor x = randn({5, 33}, DType::f64, 21, 3.0), w = randn({33}, DType::f64, 22),
               b = randn({33}, DType::f64, 23);
  for (bool center : {false, true}) {
    for (bool affine : {false, true}) {
      const Tensor wt = affine ? w : Tensor(), bt = affine && center ? b : Tensor();
      expect_close(norm(center, x, wt, bt, 1e-3), reference(x, wt, bt, 1e-3, center), 1e-13, 1e-13,
                   center ? "layernorm" : "rmsnorm");
    }
  }
}

TEST(Normalization, LowPrecisionAgainstF64OnRoundedInputs) {
  for (bool center : {false, true}) {
    for (DType dt : {DType::f32, DType::bf16, DType::f16}) {
      const std::string what = std::string(center ? "layernorm " : "rmsnorm ") + dtype_name(dt);
      Tensor x = randn({6, 200}, dt, 31, 2.0).set_requires_grad(true, dt);
      Tensor w = randn({200}, dt, 32, 0.5).set_requires_grad(true, dt);
      Tensor b = randn({200}, dt, 33, 0.2).set_requires_grad(true, dt);
      const Tensor gy = randn({6, 200}, dt, 34);
      Tensor y = norm(center, x, w, center ? b : Tensor());
      y.backward(gy);
      Tensor x64 = rounded(x, dt).set_requires_grad(true, DType::f64);
      Tensor w64 = rounded(w, dt).set_requires_grad(true, DType::f64);
      Tensor b64 = rounded(b, dt).set_requires_grad(true, DType::f64);
      Tensor y64 = norm(center, x64, w64, center ? b64 : Tensor());
      y64.backward(gy.to(DType::f64));
      // One rounding into dt on top of f32 statistics (~D * 2^-24 relative).
      const double ulp = dt == DType::f32 ? 0x1p-23 : dt == DType::bf16 ? 0x1p-8 : 0x1p-11;
      EXPECT_EQ(y.dtype(), dt);
      EXPECT_EQ(x.grad().dtype(), dt);
      EXPECT_EQ(w.grad().dtype(), dt);  // the weight's own dtype, rounded once from f32 sums
      expect_close(y, y64, 2e-5, ulp + 1e-5, what + " y");
      expect_close(x.grad(), x64.grad(), 2e-5, ulp + 1e-5, what + " dx");
      expect_close(w.grad(), w64.grad(), 1e-4, ulp + 1e-5, what + " dw");
      if (center) expect_close(b.grad(), b64.grad(), 1e-4, ulp + 1e-5, what + " db");
    }
  }
}

TEST(Normalization, LowPrecisionEqualsF32KernelRounded) {
  // bf16/f16 values widen exactly and every sum is f32: the f32 kernel on the widened inputs,
  // rounded once into dt, gives the same bits (outputs and all three gradients).
  for (bool center : {false, true}) {
    for (DType dt : {DType::bf16, DType::f16}) {
      const std::string what = std::string(center ? "layernorm " : "rmsnorm ") + dtype_name(dt);
      auto run = [&](DType compute) {
        Tensor x = randn({40, 96}, dt, 41, 2.0).to(compute).set_requires_grad(true, compute);
        Tensor w = randn({96}, dt, 42).to(compute).set_requires_grad(true, compute);
        Tensor b = randn({96}, dt, 43).to(compute).set_requires_grad(true, compute);
        Tensor y = norm(center, x, w, center ? b : Tensor());
        y.backward(randn({40, 96}, dt, 44));
        return std::vector<Tensor>{y, x.grad(), w.grad(), center ? b.grad() : w.grad()};
      };
      const auto low = run(dt), f32 = run(DType::f32);
      for (size_t i = 0; i < low.size(); ++i)
        EXPECT_TRUE(same_bits(low[i], f32[i].to(dt))) << what << " output " << i;
    }
  }
}

TEST(Normalization, LargeOffsetIsStable) {
  // Two-pass variance: a mean of 1000 costs no accuracy in f32 beyond the input's own ulp.
  std::vector<double> v = randn({4, 512}, DType::f64, 51).to_doubles();
  for (double& e : v) e += 1000.0;
  const Tensor x32 = Tensor::from_doubles(v, {4, 512}, DType::f32);
  const Tensor ref = reference(x32.to(DType::f64), Tensor(), Tensor(), 1e-5, true);
  expect_close(layernorm(x32, Tensor(), Tensor()), ref, 1e-4, 1e-4, "layernorm of 1000 + x");
}

TEST(Normalization, SameBitsWithOneAndTwoThreads) {
  // Many rows: the weight/bias gradients are summed over many fixed row chunks.
  for (bool center : {false, true}) {
    for (DType dt : {DType::f32, DType::bf16}) {
      for (const Shape& shape : {Shape{2048, 64}, Shape{100, 1000}}) {
        auto run = [&] {
          const int64_t D = shape[1];
          Tensor x = randn(shape, dt, 61, 2.0).set_requires_grad(true, dt);
          Tensor w = randn({D}, dt, 62).set_requires_grad(true, dt);
          Tensor b = randn({D}, dt, 63).set_requires_grad(true, dt);
          Tensor y = norm(center, x, w, center ? b : Tensor());
          y.backward(randn(shape, dt, 64));
          return std::vector<Tensor>{y, x.grad(), w.grad(), center ? b.grad() : w.grad()};
        };
        const auto one = with_threads(1, run), two = with_threads(2, run);
        for (size_t i = 0; i < one.size(); ++i)
          EXPECT_TRUE(same_bits(one[i], two[i]))
              << (center ? "layernorm " : "rmsnorm ") << dtype_name(dt) << " "
              << shape_to_string(shape) << " output " << i;
      }
    }
  }
}

TEST(Normalization, GradientOfAnotherDtypeIsAccepted) {
  Tensor x = randn({3, 16}, DType::bf16, 71).set_requires_grad(true, DType::bf16);
  Tensor w = randn({16}, DType::bf16, 72).set_requires_grad(true, DType::bf16);
  const Tensor g = randn({3, 16}, DType::f32, 73);
  rmsnorm(x, w).backward(g);
  const Tensor dx = x.grad(), dw = w.grad();
  x.set_grad(Tensor());
  w.set_grad(Tensor());
  rmsnorm(x, w).backward(g.to(DType::f64));
  EXPECT_TRUE(same_bits(x.grad(), dx));
  EXPECT_TRUE(same_bits(w.grad(), dw));
}

TEST(Normalization, BadInputIsAnError) {
  const Tensor x = Tensor::ones({2, 4});
  EXPECT_THROW(rmsnorm(x, Tensor::ones({5})), Error);
  EXPECT_THROW(rmsnorm(x, Tensor::ones({1, 4})), Error);
  EXPECT_THROW(rmsnorm(x, Tensor::ones({4}, DType::bf16)), Error);
  EXPECT_THROW(layernorm(x, Tensor::ones({4}), Tensor::ones({3})), Error);
  EXPECT_THROW(layernorm(x, Tensor(), Tensor::ones({4}, DType::f64)), Error);
  EXPECT_THROW(layernorm(Tensor::ones({2, 4}, DType::i32), Tensor(), Tensor()), Error);
  EXPECT_THROW(rmsnorm(Tensor::full({}, 1.0), Tensor()), Error);
  EXPECT_THROW(rmsnorm(x, Tensor(), -1.0), Error);
  EXPECT_THROW(layernorm(x, Tensor(), Tensor(), NAN), Error);
  EXPECT_THROW(rmsnorm(Tensor(), Tensor()), Error);
}

}  // namespace
}  // namespace mixprec
