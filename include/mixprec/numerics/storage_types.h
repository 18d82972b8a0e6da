// Storage types for the narrow formats: raw bits plus exact widening and RNE narrowing.
// Kernels load them, compute in f32, and store them back; they are not arithmetic types.
#pragma once

#include <bit>
#include <cstdint>

#include "mixprec/numerics/dtype.h"
#include "mixprec/numerics/encode.h"

namespace mixprec {

template <class Bits, const FloatFormat& Format>
struct NarrowFloat {
  Bits bits = 0;

  static constexpr const FloatFormat& format() { return Format; }
  static constexpr NarrowFloat from_bits(uint32_t b) {
    NarrowFloat r;
    r.bits = static_cast<Bits>(b);
    return r;
  }
  static NarrowFloat round(float x, Rounding mode = Rounding::nearest_even, bool saturate = false,
                           uint32_t random = 0) {
    return from_bits(encode_f32(Format, x, mode, saturate, random));
  }

  NarrowFloat() = default;
  // Implicit from float with round-to-nearest-even, so kernels can write `out[i] = acc;`.
  NarrowFloat(float x) : bits(static_cast<Bits>(encode_f32(Format, x))) {}  // NOLINT
  operator float() const { return to_float(); }                             // NOLINT
  float to_float() const;
};

using bf16 = NarrowFloat<uint16_t, kFormatBF16>;
using f16 = NarrowFloat<uint16_t, kFormatF16>;
using f8_e4m3fn = NarrowFloat<uint8_t, kFormatE4M3FN>;
using f8_e5m2 = NarrowFloat<uint8_t, kFormatE5M2>;

template <>
inline float bf16::to_float() const {
  return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}
template <>
inline float f16::to_float() const {
  // Branch-light exact f16 -> f32 (normal, subnormal via float scaling, inf/NaN).
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t a = bits & 0x7FFFu;
  if (a >= 0x7C00u)
    return std::bit_cast<float>(sign | 0x7F800000u | (a & 0x3FFu) << 13 |
                                (a > 0x7C00u ? 0x400000u : 0u));
  if (a >= 0x0400u) return std::bit_cast<float>(sign | ((a + (112u << 10)) << 13));
  const float mag = static_cast<float>(a) * 0x1p-24f;  // exact: a < 2^10
  return sign ? -mag : mag;
}
template <>
inline float f8_e4m3fn::to_float() const {
  return decode_f32(kFormatE4M3FN, bits);
}
template <>
inline float f8_e5m2::to_float() const {
  return decode_f32(kFormatE5M2, bits);
}

static_assert(sizeof(bf16) == 2 && sizeof(f16) == 2 && sizeof(f8_e4m3fn) == 1 &&
              sizeof(f8_e5m2) == 1);

// C++ storage type of each dtype, and back.
template <DType T>
struct CppType;
template <>
struct CppType<DType::f64> {
  using type = double;
};
template <>
struct CppType<DType::f32> {
  using type = float;
};
template <>
struct CppType<DType::bf16> {
  using type = bf16;
};
template <>
struct CppType<DType::f16> {
  using type = f16;
};
template <>
struct CppType<DType::f8_e4m3fn> {
  using type = f8_e4m3fn;
};
template <>
struct CppType<DType::f8_e5m2> {
  using type = f8_e5m2;
};
template <>
struct CppType<DType::i32> {
  using type = int32_t;
};
template <>
struct CppType<DType::i64> {
  using type = int64_t;
};
template <>
struct CppType<DType::u8> {
  using type = uint8_t;
};
template <>
struct CppType<DType::boolean> {
  using type = bool;
};
template <DType T>
using cpp_type_t = typename CppType<T>::type;

template <class T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<double>() {
  return DType::f64;
}
template <>
constexpr DType dtype_of<float>() {
  return DType::f32;
}
template <>
constexpr DType dtype_of<bf16>() {
  return DType::bf16;
}
template <>
constexpr DType dtype_of<f16>() {
  return DType::f16;
}
template <>
constexpr DType dtype_of<f8_e4m3fn>() {
  return DType::f8_e4m3fn;
}
template <>
constexpr DType dtype_of<f8_e5m2>() {
  return DType::f8_e5m2;
}
template <>
constexpr DType dtype_of<int32_t>() {
  return DType::i32;
}
template <>
constexpr DType dtype_of<int64_t>() {
  return DType::i64;
}
template <>
constexpr DType dtype_of<uint8_t>() {
  return DType::u8;
}
template <>
constexpr DType dtype_of<bool>() {
  return DType::boolean;
}

}  // namespace mixprec
