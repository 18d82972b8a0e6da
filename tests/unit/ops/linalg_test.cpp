// matmul / bmm / linear: f64 gradient checks, low precision vs f32 on the same rounded
// inputs, thread-count independence, f32 weight gradients, bad input.
#include "mixprec/ops/linalg.h"

#include <gtest/gtest.h>

#include "support/op_testing.h"

namespace mixprec {
namespace {

using namespace testing;  // mixprec::testing, the op-test support

TEST(Linalg, MatmulGradcheck) {
  expect_gradcheck([](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); },
                   {grad_input({5, 7}, 1), grad_input({7, 3}, 2)}, "matmul 2d");
  expect_gradcheck([](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); },
                   {grad_input({2, 3, 4, 5}, 3), grad_input({5, 6}, 4)}, "matmul [..,M,K]@[K,N]");
  expect_gradcheck([](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); },
                   {grad_input({2, 3, 4, 5}, 5), grad_input({2, 3, 5, 2}, 6)}, "matmul batched");
  expect_gradcheck([](const std::vector<Tensor>& in) { return bmm(in[0], in[1]); },
                   {grad_input({3, 4, 5}, 7), grad_input({3, 5, 2}, 8)}, "bmm");
  // A transposed (strided) input goes through the view's backward.
  expect_gradcheck(
      [](const std::vector<Tensor>& in) { return matmul(in[0].transpose(0, 1), in[1]); },
      {grad_input({7, 5}, 9), grad_input({7, 3}, 10)}, "matmul of a transposed view");
}

TEST(Linalg, LinearGradcheck) {
  expect_gradcheck([](const std::vector<Tensor>& in) { return linear(in[0], in[1], in[2]); },
                   {grad_input({2, 3, 6}, 11), grad_input({4, 6}, 12), grad_input({4}, 13)},
                   "linear with bias");
  expect_gradcheck([](const std::vector<Tensor>& in) { return linear(in[0], in[1]); },
                   {grad_input({5, 6}, 14), grad_input({4, 6}, 15)}, "linear without bias");
}

TEST(Linalg, MatchesF64ReferenceOnRoundedInputs) {
  // bf16/f16 GEMMs accumulate in f32 and round once: within one output ulp (plus f32
  // accumulation error) of the exact product of the same rounded inputs.
  for (DType dt : {DType::f32, DType::bf16, DType::f16}) {
    const Tensor x = randn({3, 17, 96}, dt, 21), w = randn({40, 96}, dt, 22, 0.1),
                 b = randn({40}, dt, 23);
    const Tensor ref = linear(x.to(DType::f64), w.to(DType::f64), b.to(DType::f64));
    const double ulp = dt == DType::f32 ? 0x1p-23 : dt == DType::bf16 ? 0x1p-8 : 0x1p-11;
    expect_close(linear(x, w, b), ref, 96 * 0x1p-24 * 0.5, ulp, dtype_name(dt));
    // The bf16 kernel equals the f32 kernel on the same inputs, rounded once.
    const Tensor f32 = linear(x.to(DType::f32), w.to(DType::f32), b.to(DType::f32));
    expect_close(linear(x, w, b).to(DType::f64), f32.to(dt).to(DType::f64), 0, ulp,
                 std::string("kernel vs f32 kernel ") + dtype_name(dt));
  }
}

TEST(Linalg, LowPrecisionGradientsAndF32WeightGradients) {
  for (DType dt : {DType::bf16, DType::f16}) {
    Tensor x = randn({4, 8, 64}, dt, 31).set_requires_grad(true, dt);
    Tensor w = randn({32, 64}, dt, 32, 0.1).set_requires_grad();
    Tensor b = randn({32}, dt, 33).set_requires_grad();
    const Tensor gy = randn({4, 8, 32}, dt, 34);
    linear(x, w, b).backward(gy);
    EXPECT_EQ(x.grad().dtype(), dt);
    EXPECT_EQ(w.grad().dtype(), DType::f32);
    // References: the f64 math on the same rounded values.
    Tensor x64 = rounded(x, dt).set_requires_grad(true, DType::f64);
    Tensor w64 = rounded(w, dt).set_requires_grad(true, DType::f64);
    Tensor b64 = rounded(b, dt).set_requires_grad(true, DType::f64);
    linear(x64, w64, b64).backward(gy.to(DType::f64));
    const double ulp = dt == DType::bf16 ? 0x1p-8 : 0x1p-11;
    expect_close(x.grad(), x64.grad(), 1e-6, ulp, "dx");
    expect_close(w.grad(), w64.grad(), 1e-5, 1e-6, "dW (f32, unrounded)");
    expect_close(b.grad(), b64.grad(), 1e-5, 1e-6, "db (f32, unrounded)");
  }
}

TEST(Linalg, SameBitsWithOneAndTwoThreads) {
  for (DType dt : {DType::f32, DType::bf16}) {
    auto run = [&] {
      Tensor x = randn({4, 256, 128}, dt, 41).set_requires_grad(true, dt);
      Tensor w = randn({384, 128}, dt, 42, 0.1).set_requires_grad();
      Tensor y = linear(x, w);
      Tensor z = matmul(y, randn({384, 64}, dt, 43));
      z.backward(randn(z.shape(), dt, 44));
      return std::vector<Tensor>{z, x.grad(), w.grad()};
    };
    const auto one = testing::with_threads(1, run), two = testing::with_threads(2, run);
    for (size_t i = 0; i < one.size(); ++i)
      EXPECT_TRUE(testing::same_bits(one[i], two[i])) << dtype_name(dt) << " output " << i;
  }
}

TEST(Linalg, BadInputIsAnError) {
  const Tensor a = Tensor::ones({3, 4}), b = Tensor::ones({5, 2});
  EXPECT_THROW(matmul(a, b), Error);
  EXPECT_THROW(matmul(a, Tensor::ones({4, 2}, DType::bf16)), Error);
  EXPECT_THROW(matmul(Tensor::ones({}), Tensor::ones({4, 2})), Error);  // 0-d
  EXPECT_THROW(matmul(Tensor::ones({3}), Tensor::ones({4, 2})), Error);
  EXPECT_THROW(matmul(Tensor::ones({2, 3, 4}), Tensor::ones({3, 4, 2})), Error);
  EXPECT_THROW(bmm(Tensor::ones({2, 3, 4}), Tensor::ones({4, 2})), Error);
  EXPECT_THROW(linear(a, Tensor::ones({2, 5})), Error);
  EXPECT_THROW(linear(a, Tensor::ones({2, 4}), Tensor::ones({3})), Error);
  EXPECT_THROW(matmul(Tensor::ones({3, 4}, DType::i32), Tensor::ones({4, 2}, DType::i32)), Error);
}

}  // namespace
}  // namespace mixprec
