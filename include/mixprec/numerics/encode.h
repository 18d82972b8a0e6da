// The scalar reference encoder: one rounding from f32 or f64 into any FloatFormat, and exact
// decoding back. Every bulk and SIMD path must give these bits; tests enforce it.
//
// Rules (README.md, "Numerics: what the conversions promise"):
// - round to nearest even / toward zero / stochastic, with subnormals produced, never flushed;
// - stochastic: with `random` a uniform 32-bit word, round away from zero iff
//   random < floor(discarded_fraction * 2^32); the probability equals the discarded fraction
//   whenever at most 32 bits are discarded (always so for f32 -> bf16 / f16 normals), and is
//   that fraction truncated to 32 bits otherwise;
// - overflow: inf where the format has one, NaN for e4m3fn; toward-zero and `saturate` give
//   +-max finite instead; `saturate` also maps +-inf inputs to +-max finite (the satfinite
//   convention; under ml_dtypes' only `saturate` clamps, and only finite values: rounding.h);
// - NaN stays NaN with its sign: quiet bit + top payload bits for bf16/f16/tf32/f32, the
//   all-ones pattern for the fp8 formats; +-0 keep their sign.
// - a format with neither inf nor NaN (fp4 E2M1) saturates: finite overflow and +-inf give
//   +-max finite under both conventions and with or without `saturate`; a NaN, which it
//   cannot hold, gives +max finite under satfinite (mixprec's choice: what PTX's cvt
//   .satfinite into the formats without NaN is reported to do, not checked on a GPU here;
//   torchao's f32_to_f4_unpacked has no NaN rule and gives 0x3 / 0xB) and, under ml_dtypes,
//   zero with the NaN's sign flipped (+NaN -> -0, -NaN -> +0: ml_dtypes returns its
//   quiet_NaN(), which it defines as the -0 pattern 0b1000, negated for a negative NaN;
//   measured with ml_dtypes 0.6.0, fp4_test).
// Signed formats only: the unsigned E8M0 has its own rules (e8m0.h).
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

#include "mixprec/numerics/float_format.h"
#include "mixprec/numerics/rounding.h"

namespace mixprec {

namespace encode_detail {

// Source layouts: f32 and f64 bit patterns.
template <class UInt>
struct Source;
template <>
struct Source<uint32_t> {
  static constexpr int kMant = 23, kExpBits = 8, kBias = 127;
};
template <>
struct Source<uint64_t> {
  static constexpr int kMant = 52, kExpBits = 11, kBias = 1023;
};

}  // namespace encode_detail

// Encodes the value whose f32 (UInt=uint32_t) or f64 (uint64_t) bits are `bits`.
template <class UInt>
constexpr uint32_t encode_bits(const FloatFormat& f, UInt bits, Rounding mode, bool saturate,
                               uint32_t random,
                               OverflowConvention convention = OverflowConvention::satfinite) {
  const bool satfinite = convention == OverflowConvention::satfinite;
  using S = encode_detail::Source<UInt>;
  constexpr int kTotal = 1 + S::kExpBits + S::kMant;
  constexpr UInt kAbsMask = (UInt{1} << (kTotal - 1)) - 1;
  constexpr UInt kMantMask = (UInt{1} << S::kMant) - 1;
  const uint32_t sign = static_cast<uint32_t>(bits >> (kTotal - 1)) << (f.total_bits() - 1);
  const UInt a = bits & kAbsMask;
  const int exp_field = static_cast<int>(a >> S::kMant);
  const UInt frac = a & kMantMask;

  // No inf and no NaN to return (E2M1): whatever does not fit saturates.
  const bool finite_only = !f.has_inf && !f.has_nan;
  if (exp_field == (1 << S::kExpBits) - 1) {
    if (frac != 0 && finite_only)
      return satfinite ? static_cast<uint32_t>(f.max_finite_bits())
                       : sign ^ static_cast<uint32_t>(f.sign_bit());
    if (frac != 0) {  // NaN
      const uint64_t payload =
          f.nan_keeps_payload
              ? (static_cast<uint64_t>(frac) >> (S::kMant - f.mant_bits)) & f.mant_mask()
              : 0;
      return sign | static_cast<uint32_t>(f.nan_bits() | payload);
    }
    if ((saturate && satfinite) || finite_only)
      return sign | static_cast<uint32_t>(f.max_finite_bits());
    return sign | static_cast<uint32_t>(f.has_inf ? f.inf_bits() : f.nan_bits());
  }
  if (a == 0) return sign;

  const UInt m = exp_field ? (frac | (UInt{1} << S::kMant)) : frac;
  const int e_eff = (exp_field ? exp_field : 1) - S::kBias;        // exponent of m's leading slot
  const int e_floor = e_eff - S::kMant + (std::bit_width(m) - 1);  // floor(log2 |x|)
  const int e_target = e_floor > f.min_exp() ? e_floor : f.min_exp();
  const int shift = (e_target - f.mant_bits) - (e_eff - S::kMant);  // bits discarded (> 0)
  constexpr int kWidth = static_cast<int>(sizeof(UInt) * 8);

  const UInt r = shift >= kWidth ? UInt{0} : m >> shift;
  const UInt rem = shift >= kWidth ? m : m & ((UInt{1} << shift) - 1);
  uint64_t up = 0;
  switch (mode) {
    case Rounding::nearest_even:
      if (shift >= 1 && shift <= kWidth) {  // shift == 0 (f32 -> f32): nothing to round
        const UInt half = UInt{1} << (shift - 1);
        up = rem > half || (rem == half && (r & 1));
      }
      break;
    case Rounding::toward_zero:
      break;
    case Rounding::stochastic: {
      uint64_t frac32 = 0;
      if (shift <= 32)
        frac32 = static_cast<uint64_t>(rem) << (32 - shift);
      else if (shift - 32 < kWidth)
        frac32 = static_cast<uint64_t>(rem >> (shift - 32));
      up = random < frac32;
      break;
    }
  }
  // For a normal result r carries the implicit bit, which bumps the exponent field by one;
  // a carry out of the mantissa on rounding up moves to the next binade the same way.
  const uint64_t enc =
      (static_cast<uint64_t>(e_target + f.bias - 1) << f.mant_bits) + static_cast<uint64_t>(r) + up;
  if (enc > f.max_finite_bits()) {
    if (saturate || finite_only || (mode == Rounding::toward_zero && satfinite))
      return sign | static_cast<uint32_t>(f.max_finite_bits());
    return sign | static_cast<uint32_t>(f.has_inf ? f.inf_bits() : f.nan_bits());
  }
  return sign | static_cast<uint32_t>(enc);
}

inline uint32_t encode_f32(const FloatFormat& f, float x, Rounding mode = Rounding::nearest_even,
                           bool saturate = false, uint32_t random = 0,
                           OverflowConvention convention = OverflowConvention::satfinite) {
  return encode_bits<uint32_t>(f, std::bit_cast<uint32_t>(x), mode, saturate, random, convention);
}
inline uint32_t encode_f64(const FloatFormat& f, double x, Rounding mode = Rounding::nearest_even,
                           bool saturate = false, uint32_t random = 0,
                           OverflowConvention convention = OverflowConvention::satfinite) {
  return encode_bits<uint64_t>(f, std::bit_cast<uint64_t>(x), mode, saturate, random, convention);
}

// Exact widening to f64 (NaN payload kept: quiet bit + payload for IEEE formats).
constexpr double decode_f64(const FloatFormat& f, uint64_t bits) {
  const uint64_t sign = static_cast<uint64_t>((bits & f.sign_bit()) != 0) << 63;
  if (f.is_nan(bits)) {
    const uint64_t payload = f.nan_keeps_payload ? (bits & f.mant_mask()) << (52 - f.mant_bits) : 0;
    return std::bit_cast<double>(sign | 0x7FF8000000000000ull | payload);
  }
  if (f.is_inf(bits)) return std::bit_cast<double>(sign | 0x7FF0000000000000ull);
  return decode_finite(f, bits);
}

// Exact widening to f32 (every format here except f64 fits in f32). Formats with f32's
// exponent field (bf16, tf32) widen by a plain shift, NaN bits and all; f16 gives a quiet NaN
// with the payload kept (as F16C's VCVTPH2PS does); fp8 NaNs give the canonical quiet NaN.
constexpr float decode_f32(const FloatFormat& f, uint32_t bits) {
  if (f.exp_bits == 8 && f.has_sign && f.has_subnormals)
    return std::bit_cast<float>(bits << (23 - f.mant_bits));
  const uint32_t sign = (bits & f.sign_bit()) ? 0x80000000u : 0u;
  if (f.is_nan(bits)) {
    const auto payload = static_cast<uint32_t>(
        f.nan_keeps_payload ? (bits & f.mant_mask()) << (23 - f.mant_bits) : 0);
    return std::bit_cast<float>(sign | 0x7FC00000u | payload);
  }
  if (f.is_inf(bits)) return std::bit_cast<float>(sign | 0x7F800000u);
  return static_cast<float>(decode_finite(f, bits));
}

}  // namespace mixprec
