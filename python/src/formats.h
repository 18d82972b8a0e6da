// Format names as `mixprec dtype` reads them (numerics/format_names.h), with its error.
#pragma once

#include <stdexcept>
#include <string>

#include "mixprec/numerics/format_names.h"

namespace mixprec::python {

using FormatRef = NamedFormat;

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
