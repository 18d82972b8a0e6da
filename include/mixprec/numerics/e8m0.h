// E8M0 (kFormatE8M0FNU: the MX block scale): a biased exponent e alone, value 2^(e-127) for
// e in 0..254 and NaN at 0xFF; no sign, no zero, no inf. Exact decoding, and the three ways
// peers turn an f32 into one: the OCP MX scale rounding (floor), NVIDIA's round-up (ceil),
// and ml_dtypes' plain cast.
#pragma once

#include <cstdint>

namespace mixprec {

inline constexpr uint8_t kE8M0NaN = 0xFF;
inline constexpr int kE8M0Bias = 127;

// 2^(e-127) exactly (2^-127 is an f32 subnormal); NaN for 0xFF.
float e8m0_to_f32(uint8_t e);
double e8m0_to_f64(uint8_t e);

// The largest 2^k <= v, k clamped to [-127, 127]: the OCP MX v1.0 scale rounding (torchao
// ScaleCalculationMode.FLOOR), whose biased exponent is f32's own exponent field. +-0 and
// f32 subnormals up to 2^-127 give 0x00 (2^-127, E8M0's smallest); NaN, +-inf and v < 0 give
// NaN (a scale is never negative).
uint8_t e8m0_floor(float v);
// The smallest 2^k >= v, k clamped to [-127, 127]: cvt.rp.satfinite.ue8m0x2.f32 (torchao
// RCEIL, TE MXFP8): +-0 and v <= 2^-127 give 0x00, v > 2^127 gives 0xFE (2^127); NaN, +-inf
// and v < 0 give NaN.
uint8_t e8m0_ceil(float v);
// ml_dtypes 0.6.0's cast (np.float32 -> ml_dtypes.float8_e8m0fnu), measured over all 2^32 f32
// inputs (fixture in tests/reference/fixtures/fp4): a positive normal v rounds to the nearer
// power of two, ties up, not to even (1.5 -> 2, 3 -> 4: a mantissa >= 0.5 rounds up); an
// f32 subnormal gives 2^-127 up to 2^-127 and 2^-126 above it (E8M0 has no zero); +-0, v < 0,
// +-inf, NaN and v >= 1.5 * 2^127 (which rounds past 2^127) give NaN.
uint8_t e8m0_from_f32_ml_dtypes(float v);

}  // namespace mixprec
