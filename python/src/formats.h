// Format names as `mixprec dtype` reads them: any dtype spelling (parse_dtype), plus the
// numerics formats that are not tensor dtypes (tf32, the E8M0 block scale).
#pragma once

#include <stdexcept>
#include <string>

#include "mixprec/numerics/dtype.h"
#include "mixprec/numerics/float_format.h"

namespace mixprec::python {

struct FormatRef {
  std::string name;
  const FloatFormat* format;  // nullptr for integer dtypes
  const DTypeInfo* dtype;     // nullptr for tf32 and e8m0
};

// The comma-separated spellings of the formats that are not dtypes, canonical name first.
struct NonDTypeFormat {
  const FloatFormat* format;
  const char* spellings;
};
inline constexpr NonDTypeFormat kNonDTypeFormats[] = {
    {&kFormatTF32, "tf32"},
    {&kFormatE8M0FNU, "f8_e8m0fnu,e8m0,float8_e8m0fnu,ue8m0"},
};

// An error worded as the `mixprec` command words it for the same input (its UsageError, with no
// "[where]" prefix); raised in Python as mixprec.Error, as mixprec::Error is.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Throws UsageError("unknown format 'x'; valid: ...") as `mixprec dtype` does.
FormatRef find_format(const std::string& name);

}  // namespace mixprec::python

#include <cstdint>

#include "mixprec/numerics/rounding.h"

namespace mixprec::python {

// ConvertOptions from the keyword arguments cast() and Tensor.to() take; a bad mode or
// convention throws parse_rounding's or parse_overflow_convention's mixprec::Error.
ConvertOptions convert_options(const std::string& rounding, bool saturate,
                               const std::string& overflow, uint64_t seed, uint64_t stream,
                               uint64_t index_base);

}  // namespace mixprec::python
