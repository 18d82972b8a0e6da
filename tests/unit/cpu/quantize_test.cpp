// The cpu backend's FP8 / MX quantize kernel against the reference backend's block-by-block
// loops (same bytes, same scales) on every granularity, rule and input dtype, and its edge
// cases: every FP8 byte survives a unit scale, saturation, all-zero blocks, NaN blocks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "mixprec/backend/backend.h"
#include "mixprec/numerics/encode.h"
#include "support/op_testing.h"

namespace mixprec::backend {
namespace {

using mixprec::testing::error_of;
using mixprec::testing::randn;
using mixprec::testing::same_bits;
using mixprec::testing::with_threads;

Quantized cpu_quantize(const Tensor& x, const QuantSpec& s) {
  return cpu_backend().quantize(x, s);
}
Quantized reference_quantize(const Tensor& x, const QuantSpec& s) {
  return reference_backend().quantize(x, s);
}

std::vector<uint8_t> bytes_of(const Tensor& q) {
  const Tensor c = q.contiguous();
  const auto* p = static_cast<const uint8_t*>(c.raw_data());
  return {p, p + c.numel()};
}

// Each granularity a recipe uses, with shapes that cut blocks short at the edges.
const BlockShape kBlocks[] = {{0, 0}, {1, 0}, {0, 1}, {1, 32}, {1, 128}, {128, 128}, {16, 16}};
const Shape kShapes[] = {{1, 1}, {7, 33}, {130, 200}, {256, 96}};

TEST(Quantize, CpuGivesTheReferenceBytesAndScalesOnEveryGranularityAndRule) {
  int cases = 0;
  for (DType element : {DType::f8_e4m3fn, DType::f8_e5m2})
    for (const ScaleRuleInfo& rule : kScaleRules)
      for (bool pow2 : {false, true})
        for (const BlockShape& block : kBlocks)
          for (const Shape& shape : kShapes)
            for (DType in : {DType::f32, DType::bf16}) {
              if (pow2 && rule.always_pow2) continue;
              if (rule.rule == ScaleRule::te_nvfp4) continue;  // E2M1: nvfp4_quantize_test.cpp
              const QuantSpec spec{element, block, rule.rule, pow2};
              // An outlier in block (0, 0): the scales differ block by block.
              Tensor x = randn(shape, DType::f32, 11 + static_cast<uint64_t>(cases), 3.0);
              x.data<float>()[0] = 1e4f;
              x = x.to(in);
              const Quantized c = cpu_quantize(x, spec), r = reference_quantize(x, spec);
              const std::string what = describe(spec) + " on " + dtype_name(in) + " [" +
                                       std::to_string(shape[0]) + ", " + std::to_string(shape[1]) +
                                       "]";
              ASSERT_EQ(c.data.dtype(), element) << what;
              ASSERT_EQ(c.scales.shape(), scale_shape(spec, shape[0], shape[1])) << what;
              ASSERT_TRUE(same_bits(c.scales, r.scales)) << what;
              ASSERT_EQ(bytes_of(c.data), bytes_of(r.data)) << what;
              ++cases;
            }
  EXPECT_EQ(cases, 2 * 8 * 7 * 4 * 2);  // 5 FP8 rules, 3 of them also with pow2
}

TEST(Quantize, ScalesGoBlockByBlock) {
  // [4, 64] with 1x32 blocks: each block's amax decides its own scale alone.
  std::vector<float> v(256, 0.0f);
  const float amax[4][2] = {{1, 2}, {0.5f, 448}, {3, 3}, {1e-3f, 100}};
  for (int r = 0; r < 4; ++r)
    for (int b = 0; b < 2; ++b) v[static_cast<std::size_t>(r * 64 + b * 32 + 5)] = -amax[r][b];
  const Tensor x = Tensor::from_vector(v, {4, 64});
  const Quantized q = cpu_quantize(x, {DType::f8_e4m3fn, {1, 32}, ScaleRule::torchao, false});
  ASSERT_EQ(q.scales.shape(), (Shape{4, 2}));
  for (int r = 0; r < 4; ++r)
    for (int b = 0; b < 2; ++b)
      EXPECT_EQ(q.scales.data<float>()[r * 2 + b],
                scale_from_amax(ScaleRule::torchao, amax[r][b], kFormatE4M3FN, false));
}

TEST(Quantize, EveryFp8ValueSurvivesAUnitScale) {
  for (DType element : {DType::f8_e4m3fn, DType::f8_e5m2}) {
    const FloatFormat& f = *info(element).format;
    std::vector<float> values;
    std::vector<uint8_t> codes;
    for (uint32_t b = 0; b < 256; ++b)
      if (!f.is_nan(b) && !f.is_inf(b)) {
        values.push_back(decode_f32(f, b));
        codes.push_back(static_cast<uint8_t>(b));
      }
    // The block holds the format's max, so MX FLOOR's scale is 2^0: the cast is the identity.
    const Tensor x = Tensor::from_vector(values, {1, static_cast<int64_t>(values.size())});
    const Quantized q = cpu_quantize(x, {element, {0, 0}, ScaleRule::mx_floor, true});
    EXPECT_EQ(q.scales.data<float>()[0], 1.0f) << dtype_name(element);
    EXPECT_EQ(bytes_of(q.data), codes) << dtype_name(element);
  }
}

TEST(Quantize, ValuesAboveTheFormatSaturateInsteadOfBecomingNan) {
  // MX FLOOR maps the block max into [256, 512): 500 lands above 448 and saturates there.
  const Tensor x = Tensor::from_vector(std::vector<float>{500, -500, 1}, {1, 3});
  const Quantized q = cpu_quantize(x, {DType::f8_e4m3fn, {1, 32}, ScaleRule::mx_floor, true});
  EXPECT_EQ(q.scales.data<float>()[0], 1.0f);
  EXPECT_EQ(bytes_of(q.data), (std::vector<uint8_t>{0x7E, 0xFE, 0x38}));  // 448, -448, 1
  const Tensor back = dequantize(q);
  EXPECT_EQ(back.data<float>()[0], 448.0f);
  EXPECT_EQ(back.data<float>()[1], -448.0f);
}

TEST(Quantize, AllZeroBlocksGiveZerosAndFiniteScalesUnderEveryRule) {
  Tensor x = Tensor::zeros({4, 64});
  x.data<float>()[40] = 2.0f;  // block (0, 1) is not zero
  for (const ScaleRuleInfo& rule : kScaleRules) {
    if (rule.rule == ScaleRule::te_nvfp4) continue;  // E2M1: nvfp4_quantize_test.cpp
    const Quantized q = cpu_quantize(x, {DType::f8_e4m3fn, {1, 32}, rule.rule, false});
    for (int64_t i = 0; i < q.scales.numel(); ++i)
      EXPECT_TRUE(std::isfinite(q.scales.data<float>()[i]) && q.scales.data<float>()[i] > 0)
          << rule.name << " scale " << i;
    const Tensor back = dequantize(q);
    for (int64_t i = 0; i < back.numel(); ++i)
      ASSERT_FLOAT_EQ(back.data<float>()[i], i == 40 ? 2.0f : 0.0f)
          << rule.name << " element " << i;
  }
}

TEST(Quantize, ANanPoisonsItsBlockOnly) {
  Tensor x = Tensor::ones({2, 64});
  x.data<float>()[3] = NAN;
  const Quantized q = cpu_quantize(x, {DType::f8_e4m3fn, {1, 32}, ScaleRule::torchao, false});
  EXPECT_TRUE(std::isnan(q.scales.data<float>()[0]));
  for (int i = 1; i < 4; ++i) EXPECT_EQ(q.scales.data<float>()[i], 448.0f) << i;
  const Tensor back = dequantize(q);
  EXPECT_TRUE(std::isnan(back.data<float>()[0]));
  EXPECT_EQ(back.data<float>()[32], 1.0f);
}

TEST(Quantize, BitsDoNotDependOnTheThreadCountOrTheInputLayout) {
  const Tensor x = randn({300, 257}, DType::bf16, 5);
  const QuantSpec spec{DType::f8_e4m3fn, {1, 128}, ScaleRule::deepseek, true};
  const Quantized one = with_threads(1, [&] { return cpu_quantize(x, spec); });
  const Quantized two = with_threads(2, [&] { return cpu_quantize(x, spec); });
  EXPECT_TRUE(same_bits(one.data, two.data) && same_bits(one.scales, two.scales));
  // A transposed view is read as the matrix it shows.
  const Tensor xt = randn({257, 300}, DType::bf16, 5).transpose(0, 1);
  EXPECT_TRUE(same_bits(cpu_quantize(xt, spec).data, cpu_quantize(xt.contiguous(), spec).data));
}

TEST(Quantize, BadSpecsAndInputsNameTheProblem) {
  const Tensor x = Tensor::ones({4, 4});
  EXPECT_NE(error_of([&] {
              cpu_quantize(x, {DType::bf16, {}, ScaleRule::torchao, false});
            }).find("f8_e4m3fn or f8_e5m2, got bf16"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              cpu_quantize(x, {DType::f8_e4m3fn, {-1, 2}, ScaleRule::te, false});
            }).find("block sizes must be >= 0"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              cpu_quantize(Tensor::ones({2, 2, 2}), QuantSpec{});
            }).find("2-d"),
            std::string::npos);
  EXPECT_NE(error_of([&] { cpu_quantize(x.to(DType::f64), QuantSpec{}); }).find("got f64"),
            std::string::npos);
}

}  // namespace
}  // namespace mixprec::backend
