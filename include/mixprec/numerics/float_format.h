// Bit-level description of a binary floating-point format, and the values derived from it.
// Every narrow format in mixprec (bf16, f16, fp8, fp4 E2M1, the E8M0 scale, and tf32 as a
// rounding target) is one of these constants; the encoder, decoder, dtype table and
// `mixprec dtype info` all read them.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

namespace mixprec {

struct FloatFormat {
  const char* name;
  int exp_bits;
  int mant_bits;  // explicit (stored) mantissa bits
  int bias;
  // true: IEEE-style, the all-ones exponent holds inf and NaNs. false: "fn" (finite, NaN only
  // at the all-ones pattern), as in OCP FP8 E4M3: the all-ones exponent is otherwise finite.
  bool has_inf;
  // true: a NaN keeps its sign and the top payload bits, with the quiet bit set (what x86
  // F16C and VCVTNEPS2BF16 do). false: every NaN becomes the canonical all-ones pattern.
  bool nan_keeps_payload;
  // The MX formats bend the rules above (OCP MX v1.0). false: no NaN at all, every encoding is
  // finite (float4_e2m1fn; has_inf is false too).
  bool has_nan = true;
  // false: no sign bit, the format holds positive values only (float8_e8m0fnu).
  bool has_sign = true;
  // false: exponent field 0 is an ordinary binade, 2^-bias · 1.m, so there is no zero and no
  // subnormal (float8_e8m0fnu: 2^-127 .. 2^127 and NaN).
  bool has_subnormals = true;

  constexpr int total_bits() const { return (has_sign ? 1 : 0) + exp_bits + mant_bits; }
  // 0 for an unsigned format, so `bits & sign_bit()` reads as "never negative".
  constexpr uint64_t sign_bit() const {
    return has_sign ? uint64_t{1} << (exp_bits + mant_bits) : 0;
  }
  constexpr uint64_t mant_mask() const { return (uint64_t{1} << mant_bits) - 1; }
  constexpr uint64_t exp_all_ones() const { return ((uint64_t{1} << exp_bits) - 1) << mant_bits; }
  constexpr uint64_t abs_mask() const { return (uint64_t{1} << (exp_bits + mant_bits)) - 1; }
  // Exponent of the smallest normal: field 1 where field 0 holds zero and the subnormals.
  constexpr int min_exp() const { return has_subnormals ? 1 - bias : -bias; }
  // Encoding of the largest finite magnitude: below inf, below the all-ones NaN, or the
  // all-ones pattern itself when the format has neither.
  constexpr uint64_t max_finite_bits() const {
    return has_inf ? exp_all_ones() - 1 : has_nan ? abs_mask() - 1 : abs_mask();
  }
  constexpr uint64_t inf_bits() const { return exp_all_ones(); }  // only if has_inf
  // Canonical positive quiet NaN.
  constexpr uint64_t nan_bits() const {
    return nan_keeps_payload ? exp_all_ones() | (uint64_t{1} << (mant_bits - 1)) : abs_mask();
  }
  constexpr bool is_nan(uint64_t bits) const {
    if (!has_nan) return false;
    const uint64_t a = bits & abs_mask();
    return has_inf ? a > exp_all_ones() : a == abs_mask();
  }
  constexpr bool is_inf(uint64_t bits) const {
    return has_inf && (bits & abs_mask()) == exp_all_ones();
  }
};

inline constexpr FloatFormat kFormatF32{"f32", 8, 23, 127, true, true};
inline constexpr FloatFormat kFormatTF32{"tf32", 8, 10, 127, true, true};
inline constexpr FloatFormat kFormatBF16{"bf16", 8, 7, 127, true, true};
inline constexpr FloatFormat kFormatF16{"f16", 5, 10, 15, true, true};
inline constexpr FloatFormat kFormatE4M3FN{"f8_e4m3fn", 4, 3, 7, false, false};
inline constexpr FloatFormat kFormatE5M2{"f8_e5m2", 5, 2, 15, true, false};
// OCP MX v1.0 FP4 (ml_dtypes float4_e2m1fn, torch.float4_e2m1fn_x2's element): the element of
// MXFP4 and NVFP4. 0, ±0.5 .. ±6, no inf, no NaN; conversions and packing in fp4.h.
inline constexpr FloatFormat kFormatE2M1FN{"f4_e2m1fn", 2, 1, 1, false, false, false};
// OCP MX v1.0 E8M0 (ml_dtypes float8_e8m0fnu, torch.float8_e8m0fnu): the MX block scale,
// 2^(e-127) for e in 0..254, 0xFF NaN, no sign, zero or inf; conversions in e8m0.h.
inline constexpr FloatFormat kFormatE8M0FNU{"f8_e8m0fnu", 8,    0,     127,  false,
                                            false,        true, false, false};

// 2^e as a double, usable in constant expressions.
constexpr double pow2(int e) {
  if (!std::is_constant_evaluated()) return std::ldexp(1.0, e);
  double r = 1.0;
  for (; e > 0; --e) r *= 2.0;
  for (; e < 0; ++e) r *= 0.5;
  return r;
}

// Exact value of an encoding (NaN and inf excluded: callers check first).
constexpr double decode_finite(const FloatFormat& f, uint64_t bits) {
  const uint64_t e = (bits >> f.mant_bits) & ((uint64_t{1} << f.exp_bits) - 1);
  const uint64_t m = bits & f.mant_mask();
  const double mag = e == 0 && f.has_subnormals
                         ? static_cast<double>(m) * pow2(f.min_exp() - f.mant_bits)
                         : static_cast<double>(m | (uint64_t{1} << f.mant_bits)) *
                               pow2(static_cast<int>(e) - f.bias - f.mant_bits);
  return (bits & f.sign_bit()) ? -mag : mag;
}

constexpr double max_finite(const FloatFormat& f) {
  return decode_finite(f, f.max_finite_bits());
}
constexpr double min_normal(const FloatFormat& f) {
  return pow2(f.min_exp());
}
// The smallest positive value (min_normal where there are no subnormals, as ml_dtypes' finfo).
constexpr double min_subnormal(const FloatFormat& f) {
  return pow2(f.min_exp() - (f.has_subnormals ? f.mant_bits : 0));
}
constexpr double epsilon(const FloatFormat& f) {
  return pow2(-f.mant_bits);
}

}  // namespace mixprec
