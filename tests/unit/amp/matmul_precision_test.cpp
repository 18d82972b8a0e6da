// f32 matmul precision in linear / matmul / bmm: high = operands rounded to TF32, medium =
// operands rounded to bf16, forward and backward, each equal to cpu::gemm on operands rounded
// by hand here (integer RNE on the bits, independent of the library's converters).
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <cstring>

#include "mixprec/amp/policy.h"
#include "mixprec/cpu/gemm.h"
#include "mixprec/ops/linalg.h"
#include "support/op_testing.h"

namespace mixprec::amp {
namespace {

using mixprec::testing::randn;
using mixprec::testing::same_bits;
using mixprec::testing::with_threads;

// Round-to-nearest-even of a finite f32 to `keep` mantissa bits (TF32: 10), as f32 bits.
uint32_t rne_bits(float f, int keep) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const int drop = 23 - keep;
  const uint32_t half = (1u << (drop - 1)) - 1 + ((u >> drop) & 1u);
  return (u + half) & ~((1u << drop) - 1);
}

// x rounded as `p` has the GEMM see it: an f32 tensor (TF32 values) or a bf16 tensor.
Tensor hand_rounded(const Tensor& x, MatmulPrecision p) {
  const Tensor xc = x.contiguous();
  const float* src = xc.data<float>();
  if (p == MatmulPrecision::high) {
    Tensor out = Tensor::empty(x.shape(), DType::f32);
    float* dst = out.data<float>();
    for (int64_t i = 0; i < x.numel(); ++i) dst[i] = std::bit_cast<float>(rne_bits(src[i], 10));
    return out;
  }
  Tensor out = Tensor::empty(x.shape(), DType::bf16);
  auto* dst = static_cast<uint16_t*>(out.raw_data());
  for (int64_t i = 0; i < x.numel(); ++i) dst[i] = static_cast<uint16_t>(rne_bits(src[i], 7) >> 16);
  return out;
}

// C [m, n] f32 = op(A) · op(B) (+ bias), A and B contiguous 2-d as stored.
Tensor gemm_ref(const Tensor& a, bool ta, const Tensor& b, bool tb, const Tensor& bias = {}) {
  const int64_t m = ta ? a.size(1) : a.size(0), k = ta ? a.size(0) : a.size(1);
  const int64_t n = tb ? b.size(0) : b.size(1);
  Tensor c = Tensor::empty({m, n}, DType::f32);
  cpu::gemm(m, n, k, 1.0f, {a.dtype(), a.raw_data(), a.size(1), ta},
            {b.dtype(), b.raw_data(), b.size(1), tb}, 0.0f,
            {DType::f32, c.raw_data(), n, 0, bias.defined() ? bias.raw_data() : nullptr});
  return c;
}

TEST(MatmulPrecision, HighestIsThePlainF32Gemm) {
  const Tensor a = randn({37, 300}, DType::f32, 1), b = randn({300, 29}, DType::f32, 2);
  MatmulPrecisionGuard g(MatmulPrecision::highest);
  EXPECT_TRUE(same_bits(matmul(a, b), gemm_ref(a, false, b, false)));
}

TEST(MatmulPrecision, LinearForwardAndBackwardUseRoundedOperands) {
  for (MatmulPrecision p : {MatmulPrecision::high, MatmulPrecision::medium}) {
    SCOPED_TRACE(matmul_precision_name(p));
    Tensor x = randn({6, 5, 300}, DType::f32, 3).set_requires_grad();
    Tensor w = randn({40, 300}, DType::f32, 4, 0.05).set_requires_grad();
    Tensor b = randn({40}, DType::f32, 5).set_requires_grad();
    const Tensor gy = randn({6, 5, 40}, DType::f32, 6);
    Tensor y;
    {
      MatmulPrecisionGuard guard(p);
      y = linear(x, w, b);
    }
    y.backward(gy);  // outside the guard: the backward keeps the forward's precision
    const Tensor x2 = x.detach().view({30, 300}), g2 = gy.view({30, 40});
    const Tensor rx = hand_rounded(x2, p), rw = hand_rounded(w.detach(), p);
    const Tensor rg = hand_rounded(g2, p);
    EXPECT_EQ(y.dtype(), DType::f32);
    EXPECT_TRUE(same_bits(y.detach().view({30, 40}), gemm_ref(rx, false, rw, true, b.detach())));
    EXPECT_TRUE(same_bits(x.grad().view({30, 300}), gemm_ref(rg, false, rw, false)));
    EXPECT_TRUE(same_bits(w.grad(), gemm_ref(rg, true, rx, false)));
    // The bias gradient is a plain f32 column sum of the unrounded dY.
    const Tensor ones = Tensor::ones({30, 1}, DType::f32);
    testing::expect_close(b.grad(), gemm_ref(g2, true, ones, false).view({40}), 1e-4, 1e-5,
                          "bias grad");
    // And the rounding is real: highest gives other bits.
    EXPECT_FALSE(same_bits(y.detach(), linear(x.detach(), w.detach(), b.detach())));
  }
}

TEST(MatmulPrecision, MatmulAndBmmForwardAndBackward) {
  for (MatmulPrecision p : {MatmulPrecision::high, MatmulPrecision::medium}) {
    SCOPED_TRACE(matmul_precision_name(p));
    Tensor a = randn({24, 280}, DType::f32, 7).set_requires_grad();
    Tensor b = randn({280, 18}, DType::f32, 8).set_requires_grad();
    const Tensor gc = randn({24, 18}, DType::f32, 9);
    MatmulPrecisionGuard guard(p);
    Tensor c = matmul(a, b);
    c.backward(gc);
    const Tensor ra = hand_rounded(a.detach(), p), rb = hand_rounded(b.detach(), p);
    const Tensor rg = hand_rounded(gc, p);
    EXPECT_TRUE(same_bits(c, gemm_ref(ra, false, rb, false)));
    EXPECT_TRUE(same_bits(a.grad(), gemm_ref(rg, false, rb, true)));
    EXPECT_TRUE(same_bits(b.grad(), gemm_ref(ra, true, rg, false)));

    // bmm: each batch entry is the 2-d product of its rounded slices.
    const Tensor ba = randn({3, 20, 40}, DType::f32, 10), bb = randn({3, 40, 12}, DType::f32, 11);
    const Tensor bc = bmm(ba, bb);
    for (int64_t i = 0; i < 3; ++i)
      EXPECT_TRUE(same_bits(bc.select(0, i), gemm_ref(hand_rounded(ba.select(0, i), p), false,
                                                      hand_rounded(bb.select(0, i), p), false)))
          << "batch " << i;
  }
}

TEST(MatmulPrecision, OnlyF32TimesF32IsAffected) {
  const Tensor a = randn({16, 64}, DType::bf16, 12), b = randn({64, 8}, DType::bf16, 13);
  const Tensor plain = matmul(a, b);
  MatmulPrecisionGuard guard(MatmulPrecision::medium);
  EXPECT_TRUE(same_bits(matmul(a, b), plain));
  const Tensor f = randn({16, 64}, DType::f64, 14), g = randn({64, 8}, DType::f64, 15);
  const Tensor f64_medium = matmul(f, g);
  MatmulPrecisionGuard highest(MatmulPrecision::highest);
  EXPECT_TRUE(same_bits(f64_medium, matmul(f, g)));
}

TEST(MatmulPrecision, SameBitsOnOneAndTwoThreads) {
  const Tensor x = randn({64, 300}, DType::f32, 16), w = randn({48, 300}, DType::f32, 17);
  for (MatmulPrecision p : {MatmulPrecision::high, MatmulPrecision::medium}) {
    MatmulPrecisionGuard guard(p);
    const Tensor one = with_threads(1, [&] { return linear(x, w); });
    const Tensor two = with_threads(2, [&] { return linear(x, w); });
    EXPECT_TRUE(same_bits(one, two)) << matmul_precision_name(p);
  }
}

}  // namespace
}  // namespace mixprec::amp
