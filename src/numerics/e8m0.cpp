#include "mixprec/numerics/e8m0.h"

#include <bit>
#include <cmath>

namespace mixprec {
namespace {

constexpr uint32_t kMantissa = 0x7FFFFFu;
constexpr uint32_t kHalf = 0x400000u;  // the mantissa of 1.5, and a subnormal's 2^-127

// f32 exponent field and mantissa of a v that is +0, -0 or positive finite; false otherwise.
bool split_nonnegative(float v, uint32_t& field, uint32_t& mantissa) {
  if (!(v >= 0) || std::isinf(v)) return false;  // NaN, negative, inf
  const uint32_t bits = std::bit_cast<uint32_t>(v) & 0x7FFFFFFFu;
  field = bits >> 23;
  mantissa = bits & kMantissa;
  return true;
}

}  // namespace

float e8m0_to_f32(uint8_t e) {
  if (e == kE8M0NaN) return std::bit_cast<float>(0x7FC00000u);
  // Field 0 is 2^-127, below f32's normals: the subnormal with only the top mantissa bit.
  return std::bit_cast<float>(e == 0 ? kHalf : uint32_t{e} << 23);
}

double e8m0_to_f64(uint8_t e) {
  if (e == kE8M0NaN) return std::bit_cast<double>(0x7FF8000000000000ull);
  return std::bit_cast<double>(static_cast<uint64_t>(e + 1023 - kE8M0Bias) << 52);
}

uint8_t e8m0_floor(float v) {
  uint32_t field = 0, mantissa = 0;
  if (!split_nonnegative(v, field, mantissa)) return kE8M0NaN;
  return static_cast<uint8_t>(field);  // both biases are 127; zero and subnormals: field 0
}

uint8_t e8m0_ceil(float v) {
  uint32_t field = 0, mantissa = 0;
  if (!split_nonnegative(v, field, mantissa)) return kE8M0NaN;
  if (field == 0) return mantissa > kHalf ? 1 : 0;  // above 2^-127 the next power is 2^-126
  if (mantissa != 0) ++field;
  return static_cast<uint8_t>(field > 254 ? 254 : field);  // satfinite: past 2^127 clamps
}

uint8_t e8m0_from_f32_ml_dtypes(float v) {
  uint32_t field = 0, mantissa = 0;
  if (!split_nonnegative(v, field, mantissa) || v == 0) return kE8M0NaN;
  if (field == 0) return mantissa > kHalf ? 1 : 0;
  field += mantissa >= kHalf ? 1 : 0;
  return static_cast<uint8_t>(field > 254 ? kE8M0NaN : field);
}

}  // namespace mixprec
