// The cpu backend's scaled GEMM (FP8 operands widened exactly, one GEMM per K-step with the
// scales applied to each step's f32 sum, or with power-of-two descales one GEMM over k) against
// the exact result: the reference backend's products of the dequantized operands summed in f64
// and rounded once. Bound: f32 summation error over k (which covers a K-step's), the scale
// products and the step sums, relative to Σ|a·b|.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "mixprec/backend/backend.h"
#include "support/op_testing.h"

namespace mixprec::backend {
namespace {

using mixprec::testing::error_of;
using mixprec::testing::randn;
using mixprec::testing::same_bits;
using mixprec::testing::with_threads;

// A [rows, k] matrix whose K-blocks of 32 differ in magnitude by powers of 4 and whose rows
// differ too, so a scale taken from the wrong block or row is far off.
Tensor graded(int64_t rows, int64_t k, uint64_t seed, DType dtype = DType::bf16) {
  Tensor x = randn({rows, k}, DType::f32, seed);
  float* p = x.data<float>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < k; ++c)
      p[r * k + c] *= std::ldexp(1.0f, static_cast<int>(2 * ((c / 32) % 5) - (r % 7)));
  return x.to(dtype);
}

struct Case {
  const char* name;
  QuantSpec a, b;
  int64_t m, n, k;
};

constexpr DType e4m3 = DType::f8_e4m3fn, e5m2 = DType::f8_e5m2, e2m1 = DType::f4_e2m1fn;
// clang-format off
const Case kCases[] = {
    {"tensorwise (fprop)", {e4m3, {0, 0}, ScaleRule::torchao}, {e4m3, {0, 0}, ScaleRule::torchao}, 33, 40, 96},
    {"tensorwise e5m2 gradient (dgrad)", {e5m2, {0, 0}, ScaleRule::torchao}, {e4m3, {0, 0}, ScaleRule::torchao}, 20, 64, 130},
    {"rowwise pow2", {e4m3, {1, 0}, ScaleRule::torchao, true}, {e4m3, {1, 0}, ScaleRule::torchao, true}, 37, 29, 200},
    {"rowwise x tensorwise (rowwise_with_gw_hp dgrad)", {e4m3, {1, 0}, ScaleRule::torchao, true}, {e4m3, {0, 0}, ScaleRule::torchao, true}, 16, 48, 64},
    {"TE current scaling", {e4m3, {0, 0}, ScaleRule::te}, {e5m2, {0, 0}, ScaleRule::te}, 24, 24, 80},
    {"DeepSeek 1x128 x 128x128", {e4m3, {1, 128}, ScaleRule::deepseek}, {e4m3, {128, 128}, ScaleRule::deepseek}, 70, 130, 300},
    {"DeepSeek UE8M0", {e4m3, {1, 128}, ScaleRule::deepseek, true}, {e4m3, {128, 128}, ScaleRule::deepseek, true}, 9, 140, 256},
    {"TE Float8BlockScaling", {e4m3, {1, 128}, ScaleRule::te, true}, {e4m3, {128, 128}, ScaleRule::te, true}, 20, 20, 384},
    {"MXFP8 floor", {e4m3, {1, 32}, ScaleRule::mx_floor}, {e4m3, {1, 32}, ScaleRule::mx_floor}, 40, 50, 200},
    {"MXFP8 rceil", {e4m3, {1, 32}, ScaleRule::mx_rceil}, {e4m3, {1, 32}, ScaleRule::mx_rceil}, 17, 64, 96},
    {"row x 1x128 blocks", {e4m3, {1, 0}, ScaleRule::torchao}, {e4m3, {128, 128}, ScaleRule::deepseek}, 8, 130, 260},
    {"TE NVFP4 1x16 x 16x16 (fprop, dgrad)", {e2m1, {1, 16}, ScaleRule::te_nvfp4}, {e2m1, {16, 16}, ScaleRule::te_nvfp4}, 33, 40, 96},
    {"TE NVFP4 RHT 1x16 x 1x16 (wgrad)", {e2m1, {1, 16}, ScaleRule::te_nvfp4, false, true}, {e2m1, {1, 16}, ScaleRule::te_nvfp4, false, true}, 24, 50, 256},
};
// clang-format on

// Worst |got - exact| / bound over the elements, bound from Σ|a·b| of the dequantized operands.
double worst_error(const Tensor& got, const Quantized& a, const Quantized& b, int64_t k_step) {
  const Tensor exact = reference_backend().scaled_gemm(a, b, DType::f64);
  const Tensor av = dequantize(a, DType::f64), bv = dequantize(b, DType::f64);
  const int64_t m = av.size(0), n = bv.size(0), k = av.size(1);
  const int64_t steps = (k + k_step - 1) / k_step;
  const double u = std::ldexp(1.0, -24);
  const double out_u = got.dtype() == DType::bf16 ? std::ldexp(1.0, -8) : u;
  const Tensor g = got.to(DType::f64);
  const double *ap = av.data<double>(), *bp = bv.data<double>();
  double worst = 0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double sum_abs = 0;
      for (int64_t p = 0; p < k; ++p) sum_abs += std::fabs(ap[i * k + p] * bp[j * k + p]);
      const double e = exact.data<double>()[i * n + j];
      const double bound =
          (static_cast<double>(k + steps) + 4) * u * sum_abs + out_u * std::fabs(e) + 1e-300;
      worst = std::max(worst, std::fabs(g.data<double>()[i * n + j] - e) / bound);
    }
  return worst;
}

TEST(ScaledGemm, EqualsTheExactProductWithinF32AccumulationOnEveryGranularity) {
  for (const Case& c : kCases)
    for (DType out : {DType::f32, DType::bf16}) {
      const Quantized a = cpu_backend().quantize(graded(c.m, c.k, 1), c.a);
      const Quantized b = cpu_backend().quantize(graded(c.n, c.k, 2), c.b);
      const Tensor got = cpu_backend().scaled_gemm(a, b, out);
      ASSERT_EQ(got.shape(), (Shape{c.m, c.n}));
      ASSERT_EQ(got.dtype(), out);
      const int64_t step = scaled_gemm_k_step(a, b, "test");
      const double worst = worst_error(got, a, b, step);
      EXPECT_LE(worst, 1.0) << c.name << " -> " << dtype_name(out);
      std::printf("%-48s %-4s k-step %3lld  worst error / bound %.3g\n", c.name, dtype_name(out),
                  static_cast<long long>(step), worst);
    }
}

TEST(ScaledGemm, SaturatedOperandsAndAllZeroBlocksStayExact) {
  // MX FLOOR saturates block maxima in [448, 512); whole zero K-blocks give huge (torchao)
  // or unit (TE) scales with zero data: their products must be 0, not NaN.
  Tensor x = graded(24, 256, 3, DType::f32);
  float* p = x.data<float>();
  for (int64_t r = 0; r < 24; ++r) {
    p[r * 256 + 7] = 500.0f * std::ldexp(1.0f, static_cast<int>(r % 5));  // saturates
    for (int64_t c = 128; c < 160; ++c) p[r * 256 + c] = 0.0f;            // zero blocks
  }
  for (const ScaleRuleInfo& rule : kScaleRules) {
    if (rule.rule == ScaleRule::te_nvfp4) continue;  // E2M1: nvfp4_quantize_test.cpp
    const QuantSpec spec{DType::f8_e4m3fn, {1, 32}, rule.rule, false};
    const Quantized a = cpu_backend().quantize(x, spec);
    const Quantized b = cpu_backend().quantize(graded(40, 256, 4), spec);
    const Tensor got = cpu_backend().scaled_gemm(a, b, DType::f32);
    for (int64_t i = 0; i < got.numel(); ++i) ASSERT_TRUE(std::isfinite(got.data<float>()[i]));
    EXPECT_LE(worst_error(got, a, b, 32), 1.0) << rule.name;
  }
}

TEST(ScaledGemm, BitsDoNotDependOnTheThreadCount) {
  const QuantSpec act{e4m3, {1, 128}, ScaleRule::deepseek},
      w{e4m3, {128, 128}, ScaleRule::deepseek};
  const Quantized a = cpu_backend().quantize(graded(200, 384, 5), act);
  const Quantized b = cpu_backend().quantize(graded(300, 384, 6), w);
  const Tensor one = with_threads(1, [&] { return cpu_backend().scaled_gemm(a, b, DType::bf16); });
  const Tensor two = with_threads(2, [&] { return cpu_backend().scaled_gemm(a, b, DType::bf16); });
  EXPECT_TRUE(same_bits(one, two));
}

TEST(ScaledGemm, OperandsWhoseBlocksCannotShareAKStepAreRefused) {
  const Quantized a =
      cpu_backend().quantize(graded(4, 256, 1), {e4m3, {1, 32}, ScaleRule::mx_floor});
  const Quantized b =
      cpu_backend().quantize(graded(4, 256, 1), {e4m3, {1, 128}, ScaleRule::deepseek});
  const std::string m = error_of([&] { cpu_backend().scaled_gemm(a, b, DType::f32); });
  EXPECT_NE(m.find("blocks along k must be equal"), std::string::npos) << m;
  EXPECT_NE(m.find("f8_e4m3fn 1x32 mx_floor"), std::string::npos) << m;
  EXPECT_NE(m.find("f8_e4m3fn 1x128 deepseek"), std::string::npos) << m;
  const Quantized c =
      cpu_backend().quantize(graded(4, 128, 1), {e4m3, {1, 32}, ScaleRule::mx_floor});
  EXPECT_NE(error_of([&] { cpu_backend().scaled_gemm(a, c, DType::f32); }).find("disagree on k"),
            std::string::npos);
}

}  // namespace
}  // namespace mixprec::backend
