// Transformer Engine's NVFP4 cast (te_nvfp4: E2M1 elements, E4M3 block scales under an f32
// tensor scale, 1x16 or 16x16 blocks, the RHT of wgrad operands): the cpu kernel against the
// reference backend's element-by-element loops, a block worked out by hand, the RHT against its
// 16x16 matrix, and the refusals. Peer agreement with TE's own reference quantizer:
// tests/reference/nvfp4_fixture_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "mixprec/backend/backend.h"
#include "mixprec/numerics/encode.h"
#include "mixprec/numerics/hadamard.h"
#include "mixprec/numerics/nvfp4.h"
#include "support/op_testing.h"

namespace mixprec::backend {
namespace {

using mixprec::testing::error_of;
using mixprec::testing::randn;
using mixprec::testing::same_bits;
using mixprec::testing::with_threads;

constexpr DType e2m1 = DType::f4_e2m1fn;
const QuantSpec kActivation{e2m1, {1, 16}, ScaleRule::te_nvfp4};
const QuantSpec kWeight{e2m1, {16, 16}, ScaleRule::te_nvfp4};
const QuantSpec kWgradOperand{e2m1, {1, 16}, ScaleRule::te_nvfp4, false, true};
// The gradients' casts: stochastic rounding under some key (TE's fp4_quant_bwd_grad).
const QuantSpec kGradient{e2m1, {1, 16}, ScaleRule::te_nvfp4, false, false, true, 7, 3};
const QuantSpec kWgradGradient{e2m1, {1, 16}, ScaleRule::te_nvfp4, false, true, true, 7, 4};

std::vector<uint8_t> bytes_of(const Tensor& q) {
  const Tensor c = q.contiguous();
  const auto* p = static_cast<const uint8_t*>(c.raw_data());
  return {p, p + c.numel()};
}

// Rows and 16-blocks of very different magnitudes, one outlier: the block scales differ, some
// blocks fall below the E4M3 scale's range.
Tensor varied(int64_t rows, int64_t cols, uint64_t seed, DType dtype) {
  Tensor x = randn({rows, cols}, DType::f32, seed);
  float* p = x.data<float>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      p[r * cols + c] *= std::ldexp(1.0f, static_cast<int>(3 * ((c / 16) % 4) - (r % 5)));
  p[cols + 3] = 3e3f;
  return x.to(dtype);
}

TEST(Nvfp4Quantize, CpuGivesTheReferenceBytesScalesAndTensorAmax) {
  int cases = 0;
  for (const QuantSpec& spec : {kActivation, kWeight, kWgradOperand, kGradient, kWgradGradient})
    for (const Shape& shape : {Shape{1, 16}, Shape{7, 48}, Shape{40, 96}, Shape{130, 256}})
      for (DType in : {DType::f32, DType::bf16}) {
        // The RHT of f32 values: the cpu's f32 butterflies round where the reference's f64 sum
        // rounds once (bf16 values, what training casts, sum exactly in f32: TE's case).
        if (spec.rht && in == DType::f32) continue;
        const Tensor x = varied(shape[0], shape[1], 3 + static_cast<uint64_t>(cases), in);
        const Quantized c = cpu_backend().quantize(x, spec);
        const Quantized r = reference_backend().quantize(x, spec);
        const std::string what = describe(spec) + " on " + dtype_name(in) + " [" +
                                 std::to_string(shape[0]) + ", " + std::to_string(shape[1]) + "]";
        ASSERT_EQ(c.data.dtype(), e2m1) << what;
        ASSERT_EQ(c.scales.shape(), scale_shape(spec, shape[0], shape[1])) << what;
        ASSERT_TRUE(c.tensor_amax && r.tensor_amax) << what;
        EXPECT_EQ(*c.tensor_amax, *r.tensor_amax) << what;
        EXPECT_TRUE(same_bits(c.scales, r.scales)) << what;
        EXPECT_EQ(bytes_of(c.data), bytes_of(r.data)) << what;
        ++cases;
      }
  EXPECT_EQ(cases, 5 * 4 * 2 - 8);
}

TEST(Nvfp4Quantize, ABlockWorkedOutByHand) {
  // Tensor amax 2688 = 448·6: tensor encode 1, multiplier f32(1/6). Block 0 (amax 2688):
  // decode e4m3(448) = 448, encode 1/448, so 2688 -> 6 and 448 -> 1. Block 1 (amax 6): decode
  // e4m3(1) = 1, elements as they are: 2.5 is the tie between 2 and 3 -> 2 (even), 5 -> 4.
  Tensor x = Tensor::zeros({1, 32});
  float* p = x.data<float>();
  p[0] = 2688.0f, p[1] = 448.0f, p[2] = -672.0f;  // 672/448 = 1.5
  p[16] = 6.0f, p[17] = 2.5f, p[18] = -5.0f, p[19] = 0.2f;
  const Quantized q = cpu_backend().quantize(x, kActivation);
  EXPECT_EQ(*q.tensor_amax, 2688.0f);
  EXPECT_EQ(q.scales.data<float>()[0], 448.0f);
  EXPECT_EQ(q.scales.data<float>()[1], 1.0f);
  const std::vector<uint8_t> b = bytes_of(q.data);
  EXPECT_EQ(b[0], 0x7);   // 6
  EXPECT_EQ(b[1], 0x2);   // 1
  EXPECT_EQ(b[2], 0xB);   // -1.5
  EXPECT_EQ(b[16], 0x7);  // 6
  EXPECT_EQ(b[17], 0x4);  // 2
  EXPECT_EQ(b[18], 0xE);  // -4
  EXPECT_EQ(b[19], 0x0);  // 0.2 -> 0
  // Dequantized: e2m1 · block decode · tensor decode (1 here).
  EXPECT_EQ(dequantize(q).data<float>()[2], -672.0f);
  EXPECT_EQ(dequantize(q).data<float>()[18], -4.0f);
}

TEST(Nvfp4Quantize, AnAllZeroTensorGivesZerosAndAZeroAlpha) {
  const Quantized q = cpu_backend().quantize(Tensor::zeros({2, 32}), kActivation);
  EXPECT_EQ(*q.tensor_amax, 0.0f);
  for (uint8_t v : bytes_of(q.data)) EXPECT_EQ(v, 0);
  const Tensor c = cpu_backend().scaled_gemm(q, q, DType::f32);
  for (int64_t i = 0; i < c.numel(); ++i) EXPECT_EQ(c.data<float>()[i], 0.0f);
}

TEST(Nvfp4Quantize, BitsDoNotDependOnTheThreadCount) {
  const Tensor x = varied(300, 128, 9, DType::bf16);
  for (const QuantSpec& spec : {kActivation, kWeight, kWgradOperand, kGradient, kWgradGradient}) {
    const Quantized one = with_threads(1, [&] { return cpu_backend().quantize(x, spec); });
    const Quantized two = with_threads(2, [&] { return cpu_backend().quantize(x, spec); });
    EXPECT_TRUE(same_bits(one.scales, two.scales) && same_bits(one.data, two.data))
        << describe(spec);
  }
}

// Stochastic rounding (TE's cvt.rs for the gradients): every element lands on one of the two
// E2M1 values around its scaled source, the nearer one more often, and the mean over many keys
// is the source (unbiased), where rounding to nearest keeps a bias; the key and stream choose
// the draws, and a nearest-even cast is untouched by them.
TEST(Nvfp4Quantize, StochasticRoundingIsUnbiasedAndKeyed) {
  // One block of amax 6 under tensor amax 2688 (both scales 1): elements are x itself.
  const int64_t cols = 32;
  Tensor x = Tensor::zeros({1, cols});
  float* p = x.data<float>();
  p[0] = 2688.0f, p[16] = 6.0f;
  const float probes[] = {0.2f, 0.7f, 1.1f, 2.25f, 2.9f, 4.5f, 5.9f, -3.3f, -0.1f};
  for (std::size_t i = 0; i < std::size(probes); ++i) p[17 + i] = probes[i];
  const int kKeys = 4000;
  std::vector<double> sum(std::size(probes), 0.0);
  for (int k = 0; k < kKeys; ++k) {
    QuantSpec s = kGradient;
    s.seed = static_cast<uint64_t>(k);
    const Tensor d = dequantize(cpu_backend().quantize(x, s));
    for (std::size_t i = 0; i < std::size(probes); ++i) {
      const float v = d.data<float>()[17 + i], a = std::fabs(probes[i]);
      // The E2M1 neighbours of |x|: 0, 0.5, 1, 1.5, 2, 3, 4, 6.
      const float grid[] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
      float lo = 0, hi = 6;
      for (float g : grid) {
        if (g <= a) lo = g;
        if (g >= a && hi == 6) hi = g;
      }
      ASSERT_TRUE(std::fabs(v) == lo || std::fabs(v) == hi) << probes[i] << " -> " << v;
      sum[i] += v;
    }
  }
  for (std::size_t i = 0; i < std::size(probes); ++i) {
    // The mean's standard error is at most 1 / (2·sqrt(kKeys)) (a gap of at most 2): 5 of them.
    EXPECT_NEAR(sum[i] / kKeys, probes[i], 5 * 1.0 / (2 * std::sqrt(double{kKeys}))) << probes[i];
  }
  const Tensor nearest = dequantize(cpu_backend().quantize(x, kActivation));
  EXPECT_EQ(nearest.data<float>()[17 + 3], 2.0f);  // 2.25 -> 2: a bias of 0.25 every time
  // The key chooses the draws: another seed or stream changes some bytes, the same key none.
  const Tensor g = varied(8, 64, 5, DType::bf16);
  QuantSpec other_seed = kGradient, other_stream = kGradient;
  other_seed.seed += 1, other_stream.stream += 1;
  const auto bytes = [&](const QuantSpec& s) {
    return bytes_of(cpu_backend().quantize(g, s).data);
  };
  EXPECT_EQ(bytes(kGradient), bytes(kGradient));
  EXPECT_NE(bytes(kGradient), bytes(other_seed));
  EXPECT_NE(bytes(kGradient), bytes(other_stream));
  QuantSpec keyed_nearest = kActivation;
  keyed_nearest.seed = 99;
  EXPECT_EQ(bytes(kActivation), bytes(keyed_nearest));
  EXPECT_EQ(describe(kGradient), "f4_e2m1fn 1x16 te_nvfp4 sr");
}

TEST(Rht16, EqualsItsMatrixAndKeepsDotProducts) {
  // Against x·(S·H)/4 summed in f64: exact for values within 2^16 of each other.
  const Tensor a = randn({4, 64}, DType::bf16, 21), b = randn({4, 64}, DType::bf16, 22);
  const std::vector<double> da = a.to_doubles(), db = b.to_doubles();
  std::vector<float> ta(da.begin(), da.end()), tb(db.begin(), db.end());
  const std::vector<float> a0 = ta, b0 = tb;
  rht16(ta.data(), static_cast<int64_t>(ta.size()));
  rht16(tb.data(), static_cast<int64_t>(tb.size()));
  for (std::size_t r0 = 0; r0 < ta.size(); r0 += 16)
    for (int j = 0; j < 16; ++j) {
      double s = 0;
      for (int i = 0; i < 16; ++i) s += a0[r0 + static_cast<std::size_t>(i)] * rht16_entry(i, j);
      EXPECT_EQ(ta[r0 + static_cast<std::size_t>(j)], static_cast<float>(s)) << r0 + j;
    }
  // Orthogonal: every 16-run's dot product is unchanged (to f64 rounding).
  for (std::size_t r0 = 0; r0 < ta.size(); r0 += 16) {
    double before = 0, after = 0;
    for (std::size_t i = r0; i < r0 + 16; ++i) {
      before += static_cast<double>(a0[i]) * b0[i];
      after += static_cast<double>(ta[i]) * tb[i];
    }
    EXPECT_NEAR(after, before, 1e-12 * (1 + std::fabs(before))) << r0;
  }
  // TE's first signs are (1, 1, 1, -1): the transform of e_3 is -H[3]/4.
  std::vector<float> e3(16, 0.0f);
  e3[3] = 1.0f;
  rht16(e3.data(), 16);
  EXPECT_EQ(e3[0], -0.25f);
  EXPECT_EQ(e3[1], 0.25f);  // H[3][1] = (-1)^popcount(3&1) = -1
}

TEST(Nvfp4Quantize, TheRhtGemmStillApproximatesTheUntransformedProduct) {
  // Both wgrad operands transformed along k: the product is the plain one's, to NVFP4 accuracy.
  const Tensor a = randn({32, 256}, DType::bf16, 31), b = randn({24, 256}, DType::bf16, 32);
  const Tensor plain = reference_backend().scaled_gemm(
      reference_backend().quantize(a, {DType::f8_e4m3fn, {1, 0}, ScaleRule::te}),
      reference_backend().quantize(b, {DType::f8_e4m3fn, {1, 0}, ScaleRule::te}), DType::f64);
  const Tensor rht =
      cpu_backend().scaled_gemm(cpu_backend().quantize(a, kWgradOperand),
                                cpu_backend().quantize(b, kWgradOperand), DType::f64);
  double err = 0, norm = 0;
  for (int64_t i = 0; i < plain.numel(); ++i) {
    err += std::pow(rht.data<double>()[i] - plain.data<double>()[i], 2);
    norm += std::pow(plain.data<double>()[i], 2);
  }
  EXPECT_LT(std::sqrt(err / norm), 0.15);  // E2M1: ~2 bits; a wrong sign or order gives ~1
}

TEST(Nvfp4Quantize, BadSpecsAndShapesNameTheProblem) {
  const Tensor x = randn({4, 32}, DType::f32, 1);
  std::string m = error_of([&] {
    cpu_backend().quantize(x, {DType::f8_e4m3fn, {1, 16}, ScaleRule::te_nvfp4});
  });
  EXPECT_NE(m.find("f4_e2m1fn under te_nvfp4"), std::string::npos) << m;
  m = error_of([&] { cpu_backend().quantize(x, {e2m1, {1, 32}, ScaleRule::te_nvfp4}); });
  EXPECT_NE(m.find("1x16 or 16x16"), std::string::npos) << m;
  m = error_of([&] { cpu_backend().quantize(x, {e2m1, {1, 16}, ScaleRule::mx_floor}); });
  EXPECT_NE(m.find("f8_e4m3fn or f8_e5m2"), std::string::npos) << m;
  m = error_of([&] {
    cpu_backend().quantize(x, {e2m1, {16, 16}, ScaleRule::te_nvfp4, false, true});
  });
  EXPECT_NE(m.find("RHT"), std::string::npos) << m;
  m = error_of([&] { cpu_backend().quantize(randn({4, 24}, DType::f32, 1), kActivation); });
  EXPECT_NE(m.find("multiple of 16"), std::string::npos) << m;
  const Quantized f4 = cpu_backend().quantize(x, kActivation);
  const Quantized f8 = cpu_backend().quantize(x, {DType::f8_e4m3fn, {1, 16}, ScaleRule::te});
  m = error_of([&] { cpu_backend().scaled_gemm(f4, f8, DType::f32); });
  EXPECT_NE(m.find("NVFP4 operand multiplies an NVFP4 one only"), std::string::npos) << m;
}

}  // namespace
}  // namespace mixprec::backend
