// The dtype table: one row per element type, read by everything that needs a dtype fact.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "mixprec/numerics/float_format.h"

namespace mixprec {

// New dtypes go at the end: the values of the others stay as they are.
enum class DType : uint8_t {
  f64,
  f32,
  bf16,
  f16,
  f8_e4m3fn,
  f8_e5m2,
  i32,
  i64,
  u8,
  boolean,
  f4_e2m1fn
};
inline constexpr int kNumDTypes = 11;

enum class DTypeKind : uint8_t { floating, signed_int, unsigned_int, boolean };

struct DTypeInfo {
  DType dtype;
  const char* name;     // canonical name, e.g. "bf16"
  const char* aliases;  // comma-separated spellings users bring from elsewhere
  int size;             // bytes per element
  DTypeKind kind;
  const FloatFormat* format;  // bit layout for floating dtypes, nullptr otherwise
  bool computable;   // kernels compute in it (load T, accumulate, store T); fp8 is storage only
  DType accumulate;  // what sums and products over it accumulate in
  bool reducible;    // collectives sum, max and min it (bf16/f16 widened to f32, rounded once)
};

inline constexpr FloatFormat kFormatF64{"f64", 11, 52, 1023, true, true};

// clang-format off
inline constexpr std::array<DTypeInfo, kNumDTypes> kDTypeTable{{
//   dtype             name         aliases                                  size kind                     format          compute accumulate   reducible
    {DType::f64,       "f64",       "float64,fp64,double",                   8, DTypeKind::floating,     &kFormatF64,    true,  DType::f64,  true},
    {DType::f32,       "f32",       "float32,fp32,float",                    4, DTypeKind::floating,     &kFormatF32,    true,  DType::f32,  true},
    {DType::bf16,      "bf16",      "bfloat16",                              2, DTypeKind::floating,     &kFormatBF16,   true,  DType::f32,  true},
    {DType::f16,       "f16",       "float16,fp16,half",                     2, DTypeKind::floating,     &kFormatF16,    true,  DType::f32,  true},
    {DType::f8_e4m3fn, "f8_e4m3fn", "e4m3,e4m3fn,float8_e4m3fn,fp8_e4m3",    1, DTypeKind::floating,     &kFormatE4M3FN, false, DType::f32,  false},
    {DType::f8_e5m2,   "f8_e5m2",   "e5m2,float8_e5m2,fp8_e5m2",             1, DTypeKind::floating,     &kFormatE5M2,   false, DType::f32,  false},
    {DType::i32,       "i32",       "int32,int",                             4, DTypeKind::signed_int,   nullptr,        false, DType::i64,  false},
    {DType::i64,       "i64",       "int64,long",                            8, DTypeKind::signed_int,   nullptr,        false, DType::i64,  true},
    {DType::u8,        "u8",        "uint8,byte",                            1, DTypeKind::unsigned_int, nullptr,        false, DType::i64,  false},
    {DType::boolean,   "bool",      "boolean",                               1, DTypeKind::boolean,      nullptr,        false, DType::i64,  false},
    // FP4 E2M1 (NVFP4's element): one value per byte in its low nibble (torch packs two a byte,
    // float4_e2m1fn_x2; fp4.h packs and unpacks); storage only, as FP8.
    {DType::f4_e2m1fn, "f4_e2m1fn", "e2m1,float4_e2m1fn,fp4_e2m1,fp4",       1, DTypeKind::floating,     &kFormatE2M1FN, false, DType::f32,  false},
}};
// clang-format on

constexpr bool table_rows_in_enum_order() {
  for (int i = 0; i < kNumDTypes; ++i)
    if (static_cast<int>(kDTypeTable[i].dtype) != i) return false;
  return true;
}
static_assert(table_rows_in_enum_order(), "kDTypeTable rows must follow the DType enum order");
static_assert(static_cast<int>(DType::f4_e2m1fn) + 1 == kNumDTypes, "kNumDTypes out of date");

constexpr const DTypeInfo& info(DType t) {
  return kDTypeTable[static_cast<int>(t)];
}
constexpr std::size_t dtype_size(DType t) {
  return static_cast<std::size_t>(info(t).size);
}
constexpr bool is_floating(DType t) {
  return info(t).kind == DTypeKind::floating;
}
constexpr const char* dtype_name(DType t) {
  return info(t).name;
}
constexpr bool is_computable(DType t) {
  return info(t).computable;
}
constexpr DType accumulate_dtype(DType t) {
  return info(t).accumulate;
}
// bf16 and f16: what autocast lowers to and a narrow master or gradient is stored in.
constexpr bool is_narrow_compute(DType t) {
  return info(t).computable && info(t).size == 2;
}

// Parses a canonical name or alias (case-insensitive); throws mixprec::Error listing the
// valid names otherwise.
DType parse_dtype(std::string_view name);
// Comma-separated canonical names, for error messages and --help.
std::string dtype_names();

// True when every value of `a` is exactly representable in `b`.
bool represents_exactly(DType b, DType a);

// The dtype of a result computed from operands of dtypes a and b:
// floating beats integer (int + bf16 -> bf16); among floats, the narrower type's values must
// all be representable, so bf16 + f16 -> f32 and e4m3 + e5m2 -> f16 (the smallest type that
// holds both, preferring more mantissa); among integers, the wider (bool < u8 < i32 < i64).
DType promote(DType a, DType b);

}  // namespace mixprec
