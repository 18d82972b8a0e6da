// The scale rules of FP8 / MX recipes (scale_rules.h) against each source's formula, written
// here independently (f64 arithmetic, std::log2 / std::exp2 on exact values), over every bf16
// amax and every f32 exponent.
#include <gtest/gtest.h>

#include <bit>
#include <cfloat>
#include <cmath>
#include <string>
#include <vector>

#include "mixprec/core/error.h"
#include "mixprec/numerics/scale_rules.h"

namespace mixprec {
namespace {

// Every positive finite bf16 value, as f32 (the amaxes a bf16 tensor can have).
std::vector<float> bf16_amaxes() {
  std::vector<float> v;
  for (uint32_t b = 1; b < 0x7F80u; ++b) v.push_back(std::bit_cast<float>(b << 16));
  return v;
}

// f32 values spread over every exponent field: 1.0, 1.5 and the largest mantissa of each.
std::vector<float> f32_spread() {
  std::vector<float> v;
  for (uint32_t e = 0; e < 255; ++e)
    for (uint32_t m : {0u, 1u, 0x400000u, 0x400001u, 0x7FFFFFu}) {
      const uint32_t bits = e << 23 | m;
      if (bits != 0) v.push_back(std::bit_cast<float>(bits));
    }
  return v;
}

const FloatFormat* const kElements[] = {&kFormatE4M3FN, &kFormatE5M2};

TEST(ScaleRules, MaxExponentOfTheElementFormats) {
  EXPECT_EQ(max_exponent(kFormatE4M3FN), 8);  // 448 = 1.75·2^8
  EXPECT_EQ(max_exponent(kFormatE5M2), 15);   // 57344 = 1.75·2^15
}

TEST(ScaleRules, PowersOfTwoAreExactFloorsAndCeilings) {
  for (float v : f32_spread()) {
    const double lo = std::exp2(std::floor(std::log2(static_cast<double>(v))));
    EXPECT_EQ(pow2_floor(v), static_cast<float>(lo)) << v;
    const float up = pow2_ceil(v);
    if (static_cast<double>(v) == lo)
      EXPECT_EQ(up, v);
    else
      EXPECT_EQ(up, static_cast<float>(2 * lo)) << v;  // inf above 2^127
  }
  EXPECT_EQ(pow2_floor(0.0f), 0.0f);
  EXPECT_TRUE(std::isnan(pow2_floor(NAN)));
  EXPECT_TRUE(std::isinf(pow2_floor(INFINITY)));
  EXPECT_EQ(pow2_floor(std::bit_cast<float>(0x00000003u)), std::bit_cast<float>(0x00000002u));
}

TEST(ScaleRules, TorchaoDividesInF64ThenRoundsToF32) {
  for (const FloatFormat* f : kElements) {
    const double max = max_finite(*f);
    for (float amax : bf16_amaxes()) {
      const auto want = static_cast<float>(max / std::max<double>(amax, 1e-12));
      ASSERT_EQ(scale_from_amax(ScaleRule::torchao, amax, *f, false), want) << amax;
    }
    EXPECT_EQ(scale_from_amax(ScaleRule::torchao, 0.0f, *f, false),
              static_cast<float>(max / 1e-12));
    EXPECT_EQ(scale_from_amax(ScaleRule::torchao, INFINITY, *f, false), 0.0f);
    EXPECT_TRUE(std::isnan(scale_from_amax(ScaleRule::torchao, NAN, *f, false)));
  }
}

// torchao rounds with exp2(floor(log2(v))) in f32. That is the exact floor (the mantissa
// masked) on every scale a bf16 amax gives (the header's claim): log2f rounds up only for v a
// few f32 ulps below a power of two, and max / amax never lands there for a bf16 amax. An f32
// amax can put it there (the fixtures hold torchao's own results for such rows).
TEST(ScaleRules, TorchaoPow2RoundingIsTheExactFloorForEveryBf16Amax) {
  for (const FloatFormat* f : kElements)
    for (float amax : bf16_amaxes()) {
      const float v = scale_from_amax(ScaleRule::torchao, amax, *f, false);
      ASSERT_EQ(scale_from_amax(ScaleRule::torchao, amax, *f, true), pow2_floor(v)) << amax;
    }
  // 448 / amax one ulp below 8: log2f gives 3.
  const float amax = 448.0f / std::nextafter(8.0f, 0.0f);
  const float v = scale_from_amax(ScaleRule::torchao, amax, kFormatE4M3FN, false);
  ASSERT_LT(v, 8.0f);
  EXPECT_EQ(scale_from_amax(ScaleRule::torchao, amax, kFormatE4M3FN, true), 8.0f);
}

TEST(ScaleRules, TransformerEngineDividesInF32AndGuardsZeroInfAndOverflow) {
  for (const FloatFormat* f : kElements) {
    const auto max = static_cast<float>(max_finite(*f));
    for (float amax : f32_spread()) {
      const float got = scale_from_amax(ScaleRule::te, amax, *f, false);
      const float q = max / amax;
      ASSERT_EQ(got, std::isinf(q) ? FLT_MAX : q) << amax;
      ASSERT_EQ(scale_from_amax(ScaleRule::te, amax, *f, true), pow2_floor(got));
    }
    for (float bad : {0.0f, INFINITY, NAN})
      EXPECT_EQ(scale_from_amax(ScaleRule::te, bad, *f, false), 1.0f);
  }
}

TEST(ScaleRules, DeepSeekClampsTheAmaxAndRoundsUe8m0Up) {
  for (float amax : bf16_amaxes()) {
    const float s = std::max(amax, 1e-4f) / 448.0f;
    ASSERT_EQ(scale_from_amax(ScaleRule::deepseek, amax, kFormatE4M3FN, false), s);
    const float up = scale_from_amax(ScaleRule::deepseek, amax, kFormatE4M3FN, true);
    ASSERT_EQ(static_cast<double>(up), std::exp2(std::ceil(std::log2(static_cast<double>(s)))));
    ASSERT_LE(amax / up, 448.0f);  // rounding the divisor up never overflows the format
  }
  EXPECT_EQ(scale_from_amax(ScaleRule::deepseek, 0.0f, kFormatE4M3FN, false), 1e-4f / 448.0f);
}

// OCP MX v1.0 §6.3: X = 2^(floor(log2(amax)) - emax), clamped to E8M0's range; the block's
// largest value then lands in [2^emax, 2^(emax+1)) and the cast saturates what exceeds max.
TEST(ScaleRules, MxFloorIsTheOcpSpecScale) {
  for (const FloatFormat* f : kElements) {
    const int emax = max_exponent(*f);
    for (float amax : f32_spread()) {
      const float v = scale_from_amax(ScaleRule::mx_floor, amax, *f, false);
      const int e = std::fpclassify(amax) == FP_SUBNORMAL ? -127 : std::ilogb(amax);
      ASSERT_EQ(static_cast<double>(v), std::exp2(std::clamp(e - emax, -127, 127))) << amax;
      if (std::isnormal(amax) && e - emax >= -127) {
        ASSERT_GE(amax / v, std::exp2f(static_cast<float>(emax)));
        ASSERT_LT(amax / v, std::exp2f(static_cast<float>(emax + 1)));
      }
    }
    EXPECT_EQ(scale_from_amax(ScaleRule::mx_floor, 0.0f, *f, false), std::exp2f(-127));
    EXPECT_TRUE(std::isnan(scale_from_amax(ScaleRule::mx_floor, INFINITY, *f, false)));
    EXPECT_TRUE(std::isnan(scale_from_amax(ScaleRule::mx_floor, NAN, *f, false)));
  }
}

// RCEIL: the smallest power of two >= amax·(1/max) (that product in f32), so amax / v <= max
// up to that product's rounding and nothing saturates.
TEST(ScaleRules, MxRceilRoundsTheDescaleUpToAPowerOfTwo) {
  for (const FloatFormat* f : kElements) {
    const auto max = static_cast<float>(max_finite(*f));
    for (float amax : f32_spread()) {
      const float d = amax * (1.0f / max);
      const float v = scale_from_amax(ScaleRule::mx_rceil, amax, *f, false);
      const double want =
          std::exp2(std::clamp(std::ceil(std::log2(static_cast<double>(d))), -127.0, 127.0));
      ASSERT_EQ(static_cast<double>(v), want) << amax;
    }
    EXPECT_EQ(scale_from_amax(ScaleRule::mx_rceil, 0.0f, *f, false), std::exp2f(-127));
    EXPECT_TRUE(std::isnan(scale_from_amax(ScaleRule::mx_rceil, NAN, *f, false)));
  }
}

TEST(ScaleRules, DescaleIsTheReciprocalOfMultiplyScalesOnly) {
  EXPECT_EQ(descale_of(ScaleRule::torchao, 3.0f), 1.0f / 3.0f);
  EXPECT_EQ(descale_of(ScaleRule::te, 0.25f), 4.0f);
  EXPECT_EQ(descale_of(ScaleRule::deepseek, 3.0f), 3.0f);
  EXPECT_EQ(descale_of(ScaleRule::mx_floor, 0.5f), 0.5f);
}

TEST(ScaleRules, ParseNamesEveryRuleAndListsThemOnAMistake) {
  for (const ScaleRuleInfo& r : kScaleRules) EXPECT_EQ(parse_scale_rule(r.name), r.rule);
  try {
    parse_scale_rule("rowwise", "quantize.linear.float8.scale_rule");
    FAIL();
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("quantize.linear.float8.scale_rule"), std::string::npos) << m;
    EXPECT_NE(m.find("'rowwise'"), std::string::npos) << m;
    EXPECT_NE(m.find("mx_rceil"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace mixprec
