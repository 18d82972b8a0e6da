// E8M0 (numerics/e8m0.h) against ml_dtypes (fixtures/fp4, made by
// tests/reference/make_fp4_fixtures.py): the format's constants, all 256 decodings, ml_dtypes'
// plain cast near every point where its result changes, and the MX floor / ceil roundings
// against exact powers of two, and as the MX scale rules use them. The exhaustive sweep over
// all 2^32 f32 is in fp4_exhaustive_test.cpp.
#include <gtest/gtest.h>

#include <bit>
#include <cfloat>
#include <cmath>
#include <limits>
#include <vector>

#include "fp4_fixture.h"
#include "mixprec/numerics/e8m0.h"
#include "mixprec/numerics/encode.h"
#include "mixprec/numerics/scale_rules.h"

namespace mixprec {
namespace {

using testing::F32RunTable;
using testing::fixture_values;

TEST(E8M0, FormatConstantsAreOcpMxE8M0) {
  const FloatFormat& f = kFormatE8M0FNU;
  EXPECT_EQ(f.total_bits(), 8);
  EXPECT_EQ(f.sign_bit(), 0u);
  EXPECT_EQ(max_finite(f), std::ldexp(1.0, 127));
  EXPECT_EQ(min_normal(f), std::ldexp(1.0, -127));
  EXPECT_EQ(min_subnormal(f), std::ldexp(1.0, -127)) << "no subnormals: as ml_dtypes' finfo";
  EXPECT_EQ(epsilon(f), 1.0);
  EXPECT_EQ(f.max_finite_bits(), 0xFEu);
  EXPECT_TRUE(f.is_nan(0xFF));
  for (uint32_t b = 0; b < 255; ++b) EXPECT_FALSE(f.is_nan(b) || f.is_inf(b)) << b;
}

TEST(E8M0, All256EncodingsDecodeAsMlDtypes) {
  const std::vector<float> want = fixture_values<float>("ml_dtypes", "e8m0.decode");
  ASSERT_EQ(want.size(), 256u);
  for (uint32_t e = 0; e < 256; ++e) {
    const auto b = static_cast<uint8_t>(e);
    if (e == 255) {
      EXPECT_TRUE(std::isnan(want[e]));
      EXPECT_TRUE(std::isnan(e8m0_to_f32(b)) && std::isnan(e8m0_to_f64(b)));
      EXPECT_TRUE(std::isnan(decode_f32(kFormatE8M0FNU, e)));
      continue;
    }
    EXPECT_EQ(std::bit_cast<uint32_t>(e8m0_to_f32(b)), std::bit_cast<uint32_t>(want[e])) << e;
    EXPECT_EQ(e8m0_to_f64(b), static_cast<double>(want[e])) << e;
    EXPECT_EQ(e8m0_to_f64(b), std::ldexp(1.0, static_cast<int>(e) - 127)) << e;
    // The generic decoders read the same format constant.
    EXPECT_EQ(decode_f64(kFormatE8M0FNU, e), e8m0_to_f64(b)) << e;
    EXPECT_EQ(decode_f32(kFormatE8M0FNU, e), e8m0_to_f32(b)) << e;
    // Every value is a power of two: all three roundings give it back.
    EXPECT_EQ(e8m0_floor(want[e]), b);
    EXPECT_EQ(e8m0_ceil(want[e]), b);
    EXPECT_EQ(e8m0_from_f32_ml_dtypes(want[e]), b);
  }
}

TEST(E8M0, PlainCastMatchesMlDtypesAroundEveryBoundary) {
  const F32RunTable table("e8m0.from_f32");
  ASSERT_GT(table.starts().size(), 250u);
  auto check = [&](uint32_t x) {
    ASSERT_EQ(e8m0_from_f32_ml_dtypes(std::bit_cast<float>(x)), table(x))
        << "f32 0x" << std::hex << x << " (" << std::bit_cast<float>(x) << ")";
  };
  for (const int64_t start : table.starts())
    for (int64_t d = -512; d <= 512; ++d)
      if (start + d >= 0 && start + d <= 0xFFFFFFFFll) check(static_cast<uint32_t>(start + d));
  for (uint32_t hi = 0; hi < 65536; ++hi)
    for (const uint32_t lo : {0x0000u, 0x0001u, 0x3FFFu, 0x4000u, 0x4001u, 0xFFFFu})
      check(hi << 16 | lo);
}

// The MX roundings against exact powers of two computed in f64 with frexp.
uint8_t exact_floor(float v) {
  int e = 0;
  std::frexp(static_cast<double>(v), &e);  // v = m·2^e, m in [0.5, 1): floor(log2 v) = e - 1
  return static_cast<uint8_t>(std::clamp(e - 1, -127, 127) + 127);
}
uint8_t exact_ceil(float v) {
  int e = 0;
  const double m = std::frexp(static_cast<double>(v), &e);
  return static_cast<uint8_t>(std::clamp(m == 0.5 ? e - 1 : e, -127, 127) + 127);
}

TEST(E8M0, FloorAndCeilAreExactPowersOfTwoClampedToTheRange) {
  for (uint32_t hi = 0; hi < 0x7F80; ++hi)  // every positive finite f32 top half, and tails
    for (const uint32_t lo : {0x0000u, 0x0001u, 0x4000u, 0xFFFFu}) {
      const uint32_t x = hi << 16 | lo;
      const float v = std::bit_cast<float>(x);
      if (v == 0) continue;
      ASSERT_EQ(e8m0_floor(v), exact_floor(v)) << std::hex << x;
      ASSERT_EQ(e8m0_ceil(v), exact_ceil(v)) << std::hex << x;
    }
  EXPECT_EQ(e8m0_floor(0.0f), 0x00);
  EXPECT_EQ(e8m0_floor(-0.0f), 0x00);
  EXPECT_EQ(e8m0_ceil(0.0f), 0x00);
  EXPECT_EQ(e8m0_ceil(FLT_MAX), 0xFE) << "past 2^127: satfinite";
  EXPECT_EQ(e8m0_ceil(std::ldexp(1.0f, -127)), 0x00);
  EXPECT_EQ(e8m0_ceil(std::nextafter(std::ldexp(1.0f, -127), 1.0f)), 0x01);
  EXPECT_EQ(e8m0_floor(3.0f), 128);
  EXPECT_EQ(e8m0_ceil(3.0f), 129);
  const float inf = std::numeric_limits<float>::infinity();
  for (const float bad : {inf, -inf, std::numeric_limits<float>::quiet_NaN(), -1.0f, -1e-40f}) {
    EXPECT_EQ(e8m0_floor(bad), kE8M0NaN) << bad;
    EXPECT_EQ(e8m0_ceil(bad), kE8M0NaN) << bad;
    EXPECT_EQ(e8m0_from_f32_ml_dtypes(bad), kE8M0NaN) << bad;
  }
  EXPECT_EQ(e8m0_from_f32_ml_dtypes(0.0f), kE8M0NaN) << "ml_dtypes: no zero -> NaN";
  EXPECT_EQ(e8m0_from_f32_ml_dtypes(3.0f), 129) << "ml_dtypes: ties up, not to even";
  EXPECT_EQ(e8m0_from_f32_ml_dtypes(1.5f), 128);
}

// The MX scale rules (scale_rules.h) are these roundings, held to the frexp powers of two (not
// to e8m0_floor / e8m0_ceil, which the rules call): FLOOR takes the floor of the block amax
// and removes the element's emax; RCEIL rounds amax·(1/max) up.
TEST(E8M0, MxScaleRulesAreTheFloorAndCeilOfTheAmax) {
  for (const FloatFormat* f : {&kFormatE4M3FN, &kFormatE5M2, &kFormatE2M1FN})
    for (uint32_t hi = 0; hi < 0x7F80; hi += 7)
      for (const uint32_t lo : {0x0000u, 0x0001u, 0x4000u, 0xFFFFu}) {
        const float amax = std::bit_cast<float>(hi << 16 | lo);
        if (amax == 0) continue;  // E8M0 has no zero: the rules' 2^-127 (tested above)
        const int floor_e = std::max(exact_floor(amax) - max_exponent(*f), 0);
        ASSERT_EQ(scale_from_amax(ScaleRule::mx_floor, amax, *f, true),
                  e8m0_to_f32(static_cast<uint8_t>(floor_e)))
            << f->name << " " << amax;
        // An amax whose descale underflows f32 takes E8M0's smallest scale, 2^-127.
        const float descale = amax * (1.0f / static_cast<float>(max_finite(*f)));
        ASSERT_EQ(scale_from_amax(ScaleRule::mx_rceil, amax, *f, true),
                  e8m0_to_f32(descale == 0 ? uint8_t{0} : exact_ceil(descale)))
            << f->name << " " << amax;
      }
  EXPECT_EQ(max_exponent(kFormatE2M1FN), 2) << "MXFP4's emax";
}

}  // namespace
}  // namespace mixprec
