// Format names as users write them: any dtype spelling (parse_dtype), plus the numerics
// formats that are not tensor dtypes (tf32, a rounding mode of f32; the MX block scale E8M0).
// `mixprec dtype` and the Python module read names through this one table.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "mixprec/numerics/dtype.h"
#include "mixprec/numerics/float_format.h"

namespace mixprec {

struct NamedFormat {
  std::string name;
  const FloatFormat* format;  // nullptr for integer dtypes
  const DTypeInfo* dtype;     // nullptr for the formats that are not dtypes
};

// The formats that are not dtypes, with the spellings peers use for them (comma-separated,
// the canonical name first).
struct NonDTypeFormat {
  const FloatFormat* format;
  const char* spellings;
};
inline constexpr NonDTypeFormat kNonDTypeFormats[] = {
    {&kFormatTF32, "tf32"},
    {&kFormatE8M0FNU, "f8_e8m0fnu,e8m0,float8_e8m0fnu,ue8m0"},
};

// The format `name` spells (any case), nullopt for none.
std::optional<NamedFormat> find_named_format(std::string_view name);
// "unknown format 'x'; valid: f64, f32, ..., tf32, e2m1, e8m0": what the callers' errors say.
std::string unknown_format_message(std::string_view name);

}  // namespace mixprec
