// Hand-checked edge cases for every format: ties, overflow boundaries, subnormal ties, signed
// zeros, infinities and NaNs. Each expected pattern was worked out by hand (see the comments)
// and is checked through the scalar encoder and both bulk paths.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#include "mixprec/numerics/convert.h"
#include "mixprec/numerics/encode.h"
#include "mixprec/numerics/storage_types.h"

namespace mixprec {
namespace {

struct Case {
  DType dtype;  // f32 stands for tf32 here (round_to_tf32)
  uint32_t input;
  Rounding mode;
  bool saturate;
  uint32_t want;
  const char* why;
};

constexpr Rounding RNE = Rounding::nearest_even;
constexpr Rounding RTZ = Rounding::toward_zero;
constexpr DType TF32 = DType::f32;

const Case kCases[] = {
    // ---- bf16 ----
    {DType::bf16, 0x3F800000, RNE, false, 0x3F80, "1.0 exact"},
    {DType::bf16, 0x3F808000, RNE, false, 0x3F80, "1+2^-8: tie, even stays"},
    {DType::bf16, 0x3F818000, RNE, false, 0x3F82, "tie with odd lsb rounds up"},
    {DType::bf16, 0x3F808001, RNE, false, 0x3F81, "just above a tie"},
    {DType::bf16, 0x3F807FFF, RNE, false, 0x3F80, "just below a tie"},
    {DType::bf16, 0x7F7F7FFF, RNE, false, 0x7F7F, "below the overflow tie"},
    {DType::bf16, 0x7F7F8000, RNE, false, 0x7F80, "overflow tie: odd max rounds to inf"},
    {DType::bf16, 0xFF7F8000, RNE, false, 0xFF80, "negative overflow tie"},
    {DType::bf16, 0x7F7FFFFF, RNE, false, 0x7F80, "FLT_MAX overflows"},
    {DType::bf16, 0x00000000, RNE, false, 0x0000, "+0"},
    {DType::bf16, 0x80000000, RNE, false, 0x8000, "-0 keeps its sign"},
    {DType::bf16, 0x00000001, RNE, false, 0x0000, "2^-149 is far below half a bf16 ulp"},
    {DType::bf16, 0x00008000, RNE, false, 0x0000, "2^-134: subnormal tie to even (0)"},
    {DType::bf16, 0x00008001, RNE, false, 0x0001, "above the subnormal tie"},
    {DType::bf16, 0x00018000, RNE, false, 0x0002, "subnormal tie, odd lsb up"},
    {DType::bf16, 0x00010000, RNE, false, 0x0001, "min subnormal 2^-133 exact"},
    {DType::bf16, 0x007F8000, RNE, false, 0x0080, "largest subnormal tie carries to min normal"},
    {DType::bf16, 0x7F800000, RNE, false, 0x7F80, "+inf"},
    {DType::bf16, 0xFF800000, RNE, false, 0xFF80, "-inf"},
    {DType::bf16, 0x7FC00000, RNE, false, 0x7FC0, "quiet NaN"},
    {DType::bf16, 0xFF800001, RNE, false, 0xFFC0, "signalling -NaN: quieted, sign kept"},
    {DType::bf16, 0x7FA00000, RNE, false, 0x7FE0, "NaN payload kept, quiet bit set"},
    {DType::bf16, 0x7F7F8000, RNE, true, 0x7F7F, "saturate: overflow to max"},
    {DType::bf16, 0x7F800000, RNE, true, 0x7F7F, "saturate: inf to max"},
    {DType::bf16, 0xFF800000, RNE, true, 0xFF7F, "saturate: -inf to -max"},
    {DType::bf16, 0x7FC00000, RNE, true, 0x7FC0, "saturate: NaN stays NaN"},
    {DType::bf16, 0x3F81FFFF, RTZ, false, 0x3F81, "toward zero truncates"},
    {DType::bf16, 0xBF81FFFF, RTZ, false, 0xBF81, "toward zero, negative"},
    {DType::bf16, 0x7F7FFFFF, RTZ, false, 0x7F7F, "toward zero never overflows"},
    {DType::bf16, 0x7F800000, RTZ, false, 0x7F80, "toward zero keeps inf"},
    // ---- f16 ----
    {DType::f16, 0x3F800000, RNE, false, 0x3C00, "1.0"},
    {DType::f16, 0x477FE000, RNE, false, 0x7BFF, "65504 = max"},
    {DType::f16, 0x477FEFFF, RNE, false, 0x7BFF, "65519.996 stays at max"},
    {DType::f16, 0x477FF000, RNE, false, 0x7C00, "65520 overflows (tie, odd max)"},
    {DType::f16, 0x33800000, RNE, false, 0x0001, "2^-24 = min subnormal"},
    {DType::f16, 0x33000000, RNE, false, 0x0000, "2^-25: tie to even zero"},
    {DType::f16, 0x33000001, RNE, false, 0x0001, "just above 2^-25"},
    {DType::f16, 0x33C00000, RNE, false, 0x0002, "3*2^-25: tie, odd lsb up"},
    {DType::f16, 0x38800000, RNE, false, 0x0400, "2^-14 = min normal"},
    {DType::f16, 0x387FE000, RNE, false, 0x0400, "1023.5*2^-24: tie carries to min normal"},
    {DType::f16, 0x3F801000, RNE, false, 0x3C00, "1+2^-11 tie, even"},
    {DType::f16, 0x3F803000, RNE, false, 0x3C02, "1+3*2^-11 tie, odd up"},
    {DType::f16, 0x80000000, RNE, false, 0x8000, "-0"},
    {DType::f16, 0x7F800000, RNE, false, 0x7C00, "+inf"},
    {DType::f16, 0x7FC00000, RNE, false, 0x7E00, "quiet NaN"},
    {DType::f16, 0x7F800001, RNE, false, 0x7E00, "sNaN with low payload: quieted"},
    {DType::f16, 0x7F802000, RNE, false, 0x7E01, "payload bit 13 becomes f16 payload bit 0"},
    {DType::f16, 0xFFFFFFFF, RNE, false, 0xFFFF, "-NaN, all payload bits"},
    {DType::f16, 0x49742400, RNE, true, 0x7BFF, "saturate: 1e6 to max"},
    {DType::f16, 0xFF800000, RNE, true, 0xFBFF, "saturate: -inf to -max"},
    {DType::f16, 0x477FF000, RNE, true, 0x7BFF, "saturate: overflow tie to max"},
    {DType::f16, 0x477FFF00, RTZ, false, 0x7BFF, "toward zero: 65535 to max"},
    {DType::f16, 0x49742400, RTZ, false, 0x7BFF, "toward zero: 1e6 clamps to max (IEEE)"},
    {DType::f16, 0x3F801FFF, RTZ, false, 0x3C00, "toward zero truncates"},
    // ---- f8 e4m3fn ----
    {DType::f8_e4m3fn, 0x43E00000, RNE, false, 0x7E, "448 = max"},
    {DType::f8_e4m3fn, 0x43E80000, RNE, false, 0x7E, "464: tie, even max stays"},
    {DType::f8_e4m3fn, 0x43E88000, RNE, false, 0x7F, "465 overflows to NaN (no inf)"},
    {DType::f8_e4m3fn, 0x43F00000, RNE, false, 0x7F, "480 overflows to NaN"},
    {DType::f8_e4m3fn, 0x43700000, RNE, false, 0x77, "240 = 1.875*2^7"},
    {DType::f8_e4m3fn, 0x43800000, RNE, false, 0x78, "256: all-ones exponent is finite"},
    {DType::f8_e4m3fn, 0x3B000000, RNE, false, 0x01, "2^-9 = min subnormal"},
    {DType::f8_e4m3fn, 0x3A800000, RNE, false, 0x00, "2^-10: tie to even zero"},
    {DType::f8_e4m3fn, 0x3B400000, RNE, false, 0x02, "3*2^-10: tie, odd up"},
    {DType::f8_e4m3fn, 0x3C800000, RNE, false, 0x08, "2^-6 = min normal"},
    {DType::f8_e4m3fn, 0x7F800000, RNE, false, 0x7F, "+inf to NaN"},
    {DType::f8_e4m3fn, 0xFF800000, RNE, false, 0xFF, "-inf to -NaN"},
    {DType::f8_e4m3fn, 0x7FC00000, RNE, false, 0x7F, "NaN"},
    {DType::f8_e4m3fn, 0xFFC00000, RNE, false, 0xFF, "-NaN keeps sign"},
    {DType::f8_e4m3fn, 0x80000000, RNE, false, 0x80, "-0"},
    {DType::f8_e4m3fn, 0x447A0000, RNE, true, 0x7E, "saturate: 1000 to 448"},
    {DType::f8_e4m3fn, 0x7F800000, RNE, true, 0x7E, "saturate: inf to 448"},
    {DType::f8_e4m3fn, 0xFF800000, RNE, true, 0xFE, "saturate: -inf to -448"},
    {DType::f8_e4m3fn, 0x7FC00000, RNE, true, 0x7F, "saturate: NaN stays NaN"},
    {DType::f8_e4m3fn, 0x43EB0000, RTZ, false, 0x7E, "toward zero: 470 to 448"},
    {DType::f8_e4m3fn, 0x447A0000, RTZ, false, 0x7E, "toward zero: 1000 clamps to 448"},
    // ---- f8 e5m2 ----
    {DType::f8_e5m2, 0x47600000, RNE, false, 0x7B, "57344 = max"},
    {DType::f8_e5m2, 0x47700000, RNE, false, 0x7C, "61440: tie, odd max rounds to inf"},
    {DType::f8_e5m2, 0x476FFF00, RNE, false, 0x7B, "61439 stays at max"},
    {DType::f8_e5m2, 0x37800000, RNE, false, 0x01, "2^-16 = min subnormal"},
    {DType::f8_e5m2, 0x37000000, RNE, false, 0x00, "2^-17: tie to even zero"},
    {DType::f8_e5m2, 0x7F800000, RNE, false, 0x7C, "+inf"},
    {DType::f8_e5m2, 0x7FC00000, RNE, false, 0x7F, "NaN (canonical)"},
    {DType::f8_e5m2, 0xFFC00000, RNE, false, 0xFF, "-NaN"},
    {DType::f8_e5m2, 0x49742400, RNE, true, 0x7B, "saturate: 1e6 to max"},
    {DType::f8_e5m2, 0x7F800000, RNE, true, 0x7B, "saturate: inf to max"},
    // ---- tf32 (stored as f32 words) ----
    {TF32, 0x3F801000, RNE, false, 0x3F800000, "1+2^-11: tie, even"},
    {TF32, 0x3F803000, RNE, false, 0x3F804000, "1+3*2^-11: tie, odd up"},
    {TF32, 0x3F801001, RNE, false, 0x3F802000, "just above a tie"},
    {TF32, 0x7F7FFFFF, RNE, false, 0x7F800000, "FLT_MAX overflows tf32"},
    {TF32, 0x00001000, RNE, false, 0x00000000, "2^-137: subnormal tie to zero"},
    {TF32, 0x00003000, RNE, false, 0x00004000, "3*2^-137: subnormal tie, odd up"},
    {TF32, 0x3F803FFF, RTZ, false, 0x3F802000, "toward zero"},
};

uint32_t run_bulk(const Case& c, Isa isa) {
  const float x = std::bit_cast<float>(c.input);
  ConvertOptions o;
  o.rounding = c.mode;
  o.saturate = c.saturate;
  // 40 copies so the vector kernels (which work in blocks of 8 to 32) see the value too.
  std::vector<float> in(40, x);
  if (c.dtype == TF32) {
    std::vector<float> out(in.size());
    round_to_tf32(in.data(), out.data(), in.size(), o, isa);
    return std::bit_cast<uint32_t>(out[17]);
  }
  std::vector<uint8_t> out(in.size() * dtype_size(c.dtype));
  convert_from_f32(in.data(), c.dtype, out.data(), in.size(), o, isa);
  uint32_t bits = 0;
  std::memcpy(&bits, out.data() + 17 * dtype_size(c.dtype), dtype_size(c.dtype));
  return bits;
}

TEST(EdgeCases, EveryFormatScalarEncoderAndBothBulkPaths) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(::testing::Message() << (c.dtype == TF32 ? "tf32" : dtype_name(c.dtype)) << " 0x"
                                      << std::hex << c.input << " (" << c.why << ")");
    if (c.dtype != TF32) {
      EXPECT_EQ(encode_bits<uint32_t>(*info(c.dtype).format, c.input, c.mode, c.saturate, 0),
                c.want);
    }
    EXPECT_EQ(run_bulk(c, Isa::scalar), c.want);
    if (cpu_has_avx2_f16c()) {
      EXPECT_EQ(run_bulk(c, Isa::avx2), c.want);
    }
  }
}

// From f64 the conversion rounds once. Each input sits just above a tie of the target, and
// the tie itself is what f64 -> f32 would produce, so a double rounding would go the wrong way.
TEST(EdgeCases, F64SourcesRoundOnceNotTwice) {
  struct F64Case {
    DType dtype;
    double x;
    uint32_t want, double_rounded;
  };
  const F64Case cases[] = {
      {DType::bf16, 1.0 + 0x1p-8 + 0x1p-40, 0x3F81, 0x3F80},
      {DType::f16, 1.0 + 0x1p-11 + 0x1p-40, 0x3C01, 0x3C00},
      {DType::f8_e4m3fn, 464.0 + 0x1p-30, 0x7F, 0x7E},
      {DType::f8_e5m2, 1.125 + 0x1p-40, 0x3D, 0x3C},
  };
  for (const F64Case& c : cases) {
    SCOPED_TRACE(dtype_name(c.dtype));
    EXPECT_EQ(encode_f64(*info(c.dtype).format, c.x), c.want);
    // the trap this test guards against:
    EXPECT_EQ(encode_f32(*info(c.dtype).format, static_cast<float>(c.x)), c.double_rounded);
    std::vector<uint8_t> out(dtype_size(c.dtype));
    convert_from_f64(&c.x, c.dtype, out.data(), 1);
    uint32_t bits = 0;
    std::memcpy(&bits, out.data(), out.size());
    EXPECT_EQ(bits, c.want);
  }
}

TEST(EdgeCases, F64SpecialsAndRangeLimits) {
  EXPECT_EQ(encode_f64(kFormatBF16, 1e-300), 0x0000u);
  EXPECT_EQ(encode_f64(kFormatBF16, -1e-300), 0x8000u);
  EXPECT_EQ(encode_f64(kFormatBF16, 1e39), 0x7F80u);  // beyond bf16 (and f32) range
  EXPECT_EQ(encode_f64(kFormatBF16, 4.9406564584124654e-324), 0x0000u);
  EXPECT_EQ(encode_f64(kFormatBF16, std::nan("")), 0x7FC0u);
  EXPECT_EQ(encode_f64(kFormatF16, -INFINITY), 0xFC00u);
  EXPECT_EQ(encode_f64(kFormatF32, 1.0 + 0x1p-24 + 0x1p-50), 0x3F800001u);
  EXPECT_EQ(encode_f64(kFormatF32, 1.0 + 0x1p-24), 0x3F800000u);  // tie, even
  EXPECT_EQ(encode_f64(kFormatF32, 1e39), 0x7F800000u);
  EXPECT_EQ(encode_f64(kFormatF32, 1e39, RTZ), 0x7F7FFFFFu);
}

// Stochastic rounding's rule at its extremes: random 0 rounds up any inexact value, the
// largest random word never does, and exact values never move.
TEST(EdgeCases, StochasticRoundingRandomWordExtremes) {
  const uint32_t inexact = 0x3F800001;  // 1 + 2^-23
  EXPECT_EQ(encode_bits<uint32_t>(kFormatBF16, inexact, Rounding::stochastic, false, 0), 0x3F81u);
  EXPECT_EQ(encode_bits<uint32_t>(kFormatBF16, inexact, Rounding::stochastic, false, 0xFFFFFFFF),
            0x3F80u);
  EXPECT_EQ(encode_bits<uint32_t>(kFormatBF16, 0x3F800000, Rounding::stochastic, false, 0),
            0x3F80u);
  // Half-way: 1 + 2^-8 rounds up iff random < 2^31.
  EXPECT_EQ(encode_bits<uint32_t>(kFormatBF16, 0x3F808000, Rounding::stochastic, false, 0x7FFFFFFF),
            0x3F81u);
  EXPECT_EQ(encode_bits<uint32_t>(kFormatBF16, 0x3F808000, Rounding::stochastic, false, 0x80000000),
            0x3F80u);
  // Rounding up past max overflows like nearest-even would (inf), or saturates.
  EXPECT_EQ(encode_bits<uint32_t>(kFormatF16, 0x477FF000, Rounding::stochastic, false, 0), 0x7C00u);
  EXPECT_EQ(encode_bits<uint32_t>(kFormatF16, 0x477FF000, Rounding::stochastic, true, 0), 0x7BFFu);
  EXPECT_EQ(encode_bits<uint32_t>(kFormatE4M3FN, 0x43E80000, Rounding::stochastic, false, 0),
            0x7Fu);
}

}  // namespace
}  // namespace mixprec

namespace mixprec {
namespace {

// Regressions from review: nothing to discard (f32 -> f32) must not shift by -1, and the
// storage types' double constructor rounds once.
TEST(EdgeCases, F32ToF32IsIdentityAndStorageTypesRoundDoublesOnce) {
  EXPECT_EQ(encode_bits<uint32_t>(kFormatF32, 0x3F800001u, RNE, false, 0), 0x3F800001u);
  EXPECT_EQ(encode_bits<uint32_t>(kFormatF32, 0x3F800001u, Rounding::stochastic, false, 0),
            0x3F800001u);
  const bf16 b = 1.00390625 + 0x1p-30;  // just above a bf16 tie; via f32 it would be the tie
  EXPECT_EQ(b.bits, 0x3F81);
}

}  // namespace
}  // namespace mixprec
