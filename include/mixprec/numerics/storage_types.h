// Storage types for the narrow formats: raw bits plus exact widening and RNE narrowing.
// Kernels load them, compute in f32, and store them back; they are not arithmetic types.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <tuple>
#include <type_traits>

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
  // From f64 the rounding is done once, never f64 -> f32 -> narrow.
  NarrowFloat(double x) : bits(static_cast<Bits>(encode_f64(Format, x))) {}  // NOLINT
  operator float() const { return to_float(); }                              // NOLINT
  float to_float() const;
};

using bf16 = NarrowFloat<uint16_t, kFormatBF16>;
using f16 = NarrowFloat<uint16_t, kFormatF16>;
using f8_e4m3fn = NarrowFloat<uint8_t, kFormatE4M3FN>;
using f8_e5m2 = NarrowFloat<uint8_t, kFormatE5M2>;
using f4_e2m1fn = NarrowFloat<uint8_t, kFormatE2M1FN>;  // one value a byte, in the low nibble

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
template <>
inline float f4_e2m1fn::to_float() const {
  return decode_f32(kFormatE2M1FN, bits & 0xFu);
}

static_assert(sizeof(bf16) == 2 && sizeof(f16) == 2 && sizeof(f8_e4m3fn) == 1 &&
              sizeof(f8_e5m2) == 1 && sizeof(f4_e2m1fn) == 1);

// C++ storage type of each dtype, in DType enum order: one list read in both directions.
using StorageTypes = std::tuple<double, float, bf16, f16, f8_e4m3fn, f8_e5m2, int32_t, int64_t,
                                uint8_t, bool, f4_e2m1fn>;
static_assert(std::tuple_size_v<StorageTypes> == kNumDTypes);

template <DType T>
using cpp_type_t = std::tuple_element_t<static_cast<std::size_t>(T), StorageTypes>;

namespace detail {
template <class T, std::size_t I = 0>
constexpr std::size_t storage_index() {
  static_assert(I < std::tuple_size_v<StorageTypes>, "not a mixprec storage type");
  if constexpr (std::is_same_v<T, std::tuple_element_t<I, StorageTypes>>)
    return I;
  else
    return storage_index<T, I + 1>();
}
}  // namespace detail

template <class T>
constexpr DType dtype_of() {
  return static_cast<DType>(detail::storage_index<T>());
}

static_assert(dtype_of<bf16>() == DType::bf16 && dtype_of<bool>() == DType::boolean);
static_assert(std::is_same_v<cpp_type_t<DType::f8_e5m2>, f8_e5m2>);

}  // namespace mixprec
