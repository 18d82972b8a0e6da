// FP4 E2M1 (numerics/fp4.h) against ml_dtypes and torchao (fixtures/fp4, made by
// tests/reference/make_fp4_fixtures.py): the format's constants, all 16 decodings, every
// bf16 pattern and every f32 near each rounding boundary cast bit for bit as ml_dtypes casts
// them, f64 at the boundaries, torchao's own cast and its nibble packing, the satfinite edge
// rules, and stochastic rounding (unbiased, only ever the two neighbours). The exhaustive
// sweep over all 2^32 f32 is in fp4_exhaustive_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <vector>

#include "fp4_fixture.h"
#include "mixprec/core/error.h"
#include "mixprec/numerics/encode.h"
#include "mixprec/numerics/fp4.h"
#include "mixprec/numerics/philox.h"

namespace mixprec {
namespace {

using testing::F32RunTable;
using testing::fixture_values;
constexpr OverflowConvention kMlDtypes = OverflowConvention::ml_dtypes;
constexpr Rounding RNE = Rounding::nearest_even;

TEST(E2M1, FormatConstantsAreOcpMxFp4) {
  const FloatFormat& f = kFormatE2M1FN;
  EXPECT_EQ(f.total_bits(), 4);
  EXPECT_EQ(max_finite(f), 6.0);
  EXPECT_EQ(min_normal(f), 1.0);
  EXPECT_EQ(min_subnormal(f), 0.5);
  EXPECT_EQ(epsilon(f), 0.5);
  EXPECT_EQ(f.max_finite_bits(), 0x7u);
  for (uint32_t b = 0; b < 16; ++b) {
    EXPECT_FALSE(f.is_nan(b)) << b;
    EXPECT_FALSE(f.is_inf(b)) << b;
  }
}

TEST(E2M1, AllSixteenEncodingsDecodeAsMlDtypes) {
  const std::vector<float> want = fixture_values<float>("ml_dtypes", "e2m1.decode");
  ASSERT_EQ(want.size(), 16u);
  for (uint8_t b = 0; b < 16; ++b) {
    EXPECT_EQ(std::bit_cast<uint32_t>(e2m1_to_f32(b)), std::bit_cast<uint32_t>(want[b])) << +b;
    EXPECT_EQ(decode_f64(kFormatE2M1FN, b), static_cast<double>(want[b])) << +b;
    EXPECT_EQ(e2m1_to_f32(static_cast<uint8_t>(b | 0xA0)), want[b]) << "high bits are ignored";
    // Every value is exact, so it encodes back to itself.
    EXPECT_EQ(e2m1_from_f32(want[b]), b);
  }
}

// Both conventions agree on every finite input; they differ only on NaN.
void expect_cast(uint32_t f32_bits, uint8_t want, const char* what) {
  const float x = std::bit_cast<float>(f32_bits);
  ASSERT_EQ(e2m1_from_f32(x, RNE, 0, kMlDtypes), want)
      << what << " 0x" << std::hex << f32_bits << " (" << x << ")";
  if (!std::isnan(x)) {
    ASSERT_EQ(e2m1_from_f32(x), want) << what << " satfinite 0x" << std::hex << f32_bits;
    ASSERT_EQ(e2m1_from_f64(x, RNE, 0, kMlDtypes), want) << what << " via f64";
  }
}

TEST(E2M1, EveryBf16PatternCastsAsMlDtypes) {
  const std::vector<uint8_t> want = fixture_values<uint8_t>("ml_dtypes", "e2m1.from_bf16");
  ASSERT_EQ(want.size(), 65536u);
  for (uint32_t b = 0; b < 65536; ++b) expect_cast(b << 16, want[b], "bf16");
}

// Every f32 within 4096 ulps of each point where ml_dtypes' result changes (the rounding
// boundaries, the NaN edges), plus every f32 whose top 16 bits vary with a few low-bit tails.
TEST(E2M1, F32AroundEveryRoundingBoundaryCastsAsMlDtypes) {
  const F32RunTable table("e2m1.from_f32");
  ASSERT_GT(table.starts().size(), 8u);
  for (const int64_t start : table.starts())
    for (int64_t d = -4096; d <= 4096; ++d) {
      const int64_t x = start + d;
      if (x >= 0 && x <= 0xFFFFFFFFll)
        expect_cast(static_cast<uint32_t>(x), table(static_cast<uint32_t>(x)), "boundary");
    }
  for (uint32_t hi = 0; hi < 65536; ++hi)
    for (const uint32_t lo : {0x0000u, 0x0001u, 0x7FFFu, 0x8000u, 0x8001u, 0xFFFFu}) {
      const uint32_t x = hi << 16 | lo;
      expect_cast(x, table(x), "sweep");
    }
}

// E2M1 rounded from an f64 once, by exact comparison with the midpoints (all exact in f64):
// nearest, ties to the even encoding, saturating at 6; NaN is left to the callers.
uint8_t e2m1_exact_reference(double x) {
  const double values[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  const double a = std::fabs(x);
  uint8_t best = 7;
  for (uint8_t i = 0; i < 7; ++i) {
    const double mid = (values[i] + values[i + 1]) / 2;
    if (a < mid || (a == mid && i % 2 == 0)) {
      best = i;
      break;
    }
  }
  return static_cast<uint8_t>(best | (std::signbit(x) ? 8 : 0));
}

// ml_dtypes casts an f64 through f32 (two roundings: 0.25 + 2^-54 becomes the tie 0.25 and
// then 0), mixprec rounds it once (0.25 + 2^-54 -> 0.5), as all its f64 narrowings do
// (convert.h). So: ml_dtypes' f64 results are our f32 cast of f32(x), and our f64 cast is the
// exact single rounding; the fixture holds inputs where the two differ.
TEST(E2M1, F64AtEveryRoundingBoundaryRoundsOnceWhereMlDtypesRoundsTwice) {
  const std::vector<double> in = fixture_values<double>("ml_dtypes", "e2m1.from_f64.in");
  const std::vector<uint8_t> want = fixture_values<uint8_t>("ml_dtypes", "e2m1.from_f64.out");
  ASSERT_EQ(in.size(), want.size());
  ASSERT_GT(in.size(), 100u);
  std::size_t differ = 0;
  for (std::size_t i = 0; i < in.size(); ++i) {
    SCOPED_TRACE(::testing::Message()
                 << "f64 0x" << std::hex << std::bit_cast<uint64_t>(in[i]) << " (" << in[i] << ")");
    const float through_f32 = static_cast<float>(in[i]);
    EXPECT_EQ(e2m1_from_f32(through_f32, RNE, 0, kMlDtypes), want[i]);
    const uint8_t once = e2m1_from_f64(in[i], RNE, 0, kMlDtypes);
    if (!std::isnan(in[i])) {
      EXPECT_EQ(once, e2m1_exact_reference(in[i]));
    }
    differ += once != want[i];
  }
  EXPECT_GT(differ, 8u) << "the fixture should hold double-rounding cases";
}

TEST(E2M1, TorchaoCastAgreesOnFiniteValuesAndInfinities) {
  const std::vector<float> in = fixture_values<float>("torchao", "cast.in");
  const std::vector<uint8_t> want = fixture_values<uint8_t>("torchao", "cast.out");
  ASSERT_EQ(in.size(), want.size());
  std::vector<uint8_t> got(in.size());
  e2m1_from_f32(in, got);
  for (std::size_t i = 0; i < in.size(); ++i) EXPECT_EQ(got[i], want[i]) << in[i];
}

// The edge rules, spelled out (ml_dtypes' are also in the fixtures above).
TEST(E2M1, OverflowInfinityAndNanFollowEachConvention) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const OverflowConvention c : {OverflowConvention::satfinite, kMlDtypes})
    for (const Rounding m : {RNE, Rounding::toward_zero, Rounding::stochastic}) {
      EXPECT_EQ(e2m1_from_f32(7.0f, m, ~0u, c), 0x7);
      EXPECT_EQ(e2m1_from_f32(-1e30f, m, ~0u, c), 0xF);
      EXPECT_EQ(e2m1_from_f32(inf, m, 0, c), 0x7);
      EXPECT_EQ(e2m1_from_f32(-inf, m, 0, c), 0xF);
      EXPECT_EQ(e2m1_from_f64(1e300, m, ~0u, c), 0x7);
    }
  EXPECT_EQ(e2m1_from_f32(nan), 0x7) << "satfinite: NaN -> +max";
  EXPECT_EQ(e2m1_from_f32(-nan), 0x7);
  EXPECT_EQ(e2m1_from_f32(nan, RNE, 0, kMlDtypes), 0x8) << "ml_dtypes: +NaN -> -0";
  EXPECT_EQ(e2m1_from_f32(-nan, RNE, 0, kMlDtypes), 0x0) << "ml_dtypes: -NaN -> +0";
  // Ties to even: 0.25 -> 0, 0.75 -> 1, 1.25 -> 1, 2.5 -> 2, 5 -> 4; and signed zeros.
  EXPECT_EQ(e2m1_from_f32(0.25f), 0x0);
  EXPECT_EQ(e2m1_from_f32(0.75f), 0x2);
  EXPECT_EQ(e2m1_from_f32(1.25f), 0x2);
  EXPECT_EQ(e2m1_from_f32(1.75f), 0x4);
  EXPECT_EQ(e2m1_from_f32(2.5f), 0x4);
  EXPECT_EQ(e2m1_from_f32(3.5f), 0x6);
  EXPECT_EQ(e2m1_from_f32(5.0f), 0x6);
  EXPECT_EQ(e2m1_from_f32(-0.25f), 0x8);
  EXPECT_EQ(e2m1_from_f32(-0.0f), 0x8);
  EXPECT_EQ(e2m1_from_f32(5.0f, Rounding::toward_zero), 0x6);
  EXPECT_EQ(e2m1_from_f32(-5.9f, Rounding::toward_zero), 0xE);
}

// The packing of torch.float4_e2m1fn_x2 (torchao pack_uint4): element 2i low, 2i+1 high.
TEST(E2M1, PacksTwoPerByteAsTorchao) {
  const std::vector<uint8_t> nibbles = fixture_values<uint8_t>("torchao", "pack.nibbles");
  const std::vector<uint8_t> want = fixture_values<uint8_t>("torchao", "pack.packed");
  ASSERT_EQ(want.size() * 2, nibbles.size());
  std::vector<uint8_t> packed(want.size());
  pack_e2m1(nibbles, packed);
  EXPECT_EQ(packed, want);
  std::vector<uint8_t> back(nibbles.size());
  unpack_e2m1(packed, back);
  EXPECT_EQ(back, nibbles);

  // Fused: f32 -> packed -> f32 round trip of the exact values.
  std::vector<float> values(nibbles.size()), again(nibbles.size());
  e2m1_to_f32(nibbles, values);
  std::vector<uint8_t> fused(want.size());
  e2m1_pack_from_f32(values, fused);
  EXPECT_EQ(fused, packed);  // -0 keeps its sign bit
  e2m1_unpack_to_f32(fused, again);
  EXPECT_EQ(again, values);
}

TEST(E2M1, OddCountsPadTheLastHighNibbleAndSizesAreChecked) {
  const std::vector<uint8_t> nibbles = {0x1, 0x2, 0xF};
  std::vector<uint8_t> packed(2);
  pack_e2m1(nibbles, packed);
  EXPECT_EQ(packed, (std::vector<uint8_t>{0x21, 0x0F}));
  std::vector<uint8_t> back(3);
  unpack_e2m1(packed, back);
  EXPECT_EQ(back, nibbles);
  std::vector<uint8_t> wrong(1);
  EXPECT_THROW(pack_e2m1(nibbles, wrong), Error);
  EXPECT_THROW(unpack_e2m1(wrong, back), Error);
  std::vector<float> f(3);
  EXPECT_THROW(e2m1_unpack_to_f32(wrong, f), Error);
  try {
    pack_e2m1(nibbles, wrong);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("pack_e2m1"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("3 and 1"), std::string::npos) << e.what();
  }
}

// Stochastic rounding: N copies of x round to lo or hi (its two E2M1 neighbours) only, up
// with probability p = (x - lo) / (hi - lo). The mean's standard error is
// (hi - lo)·sqrt(p(1-p)/N); 6 standard errors (a false alarm below 1e-8 per check) bound the
// mean and the share of ups.
TEST(E2M1, StochasticRoundingIsUnbiasedAndOnlyPicksTheTwoNeighbours) {
  constexpr std::size_t kN = 1 << 18;
  const float xs[] = {0.1f, 0.3f, 0.75f, 1.2f, 2.9f, 3.3f, 5.5f, 5.999f, -0.6f, -4.1f, 0.25f};
  for (const float x : xs) {
    const std::vector<float> in(kN, x);
    std::vector<uint8_t> packed((kN + 1) / 2);
    ConvertOptions o;
    o.rounding = Rounding::stochastic;
    o.seed = 33;
    e2m1_pack_from_f32(in, packed, o);
    std::vector<float> out(kN);
    e2m1_unpack_to_f32(packed, out);
    const uint8_t lo_bits = e2m1_from_f32(x, Rounding::toward_zero);
    const double lo = e2m1_to_f32(lo_bits), hi = e2m1_to_f32(static_cast<uint8_t>(lo_bits + 1));
    const double p = (x - lo) / (hi - lo);
    double sum = 0;
    std::size_t ups = 0;
    for (const float v : out) {
      ASSERT_TRUE(v == lo || v == hi) << x << " -> " << v;
      sum += v;
      ups += v == hi;
    }
    const double se = std::fabs(hi - lo) * std::sqrt(p * (1 - p) / kN);
    EXPECT_NEAR(sum / kN, x, 6 * se) << x;
    EXPECT_NEAR(static_cast<double>(ups) / kN, p, 6 * std::sqrt(p * (1 - p) / kN)) << x;
  }
}

TEST(E2M1, StochasticRoundingIsKeyedByIndexAndExactValuesNeverMove) {
  std::vector<float> in(1000);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = 0.01f * static_cast<float>(i) - 5;
  ConvertOptions o;
  o.rounding = Rounding::stochastic;
  o.seed = 7;
  o.stream = 3;
  std::vector<uint8_t> all(in.size()), tail(in.size() - 333);
  e2m1_from_f32(in, all, o);
  // The same elements converted from an offset call give the same bits.
  o.index_base = 333;
  e2m1_from_f32(std::span<const float>(in).subspan(333), tail, o);
  EXPECT_TRUE(std::equal(tail.begin(), tail.end(), all.begin() + 333));
  // Each element's word is philox_u32(seed, stream, index), as convert_from_f32 draws it.
  for (std::size_t i = 0; i < in.size(); ++i)
    ASSERT_EQ(all[i], e2m1_from_f32(in[i], Rounding::stochastic, philox_u32(7, 3, i))) << i;
  for (uint8_t b = 0; b < 16; ++b)
    for (const uint32_t r : {0u, 1u, 0x80000000u, ~0u})
      EXPECT_EQ(e2m1_from_f32(e2m1_to_f32(b), Rounding::stochastic, r), b);
}

}  // namespace
}  // namespace mixprec
