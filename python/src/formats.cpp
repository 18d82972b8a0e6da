#include "formats.h"

#include <algorithm>
#include <cctype>

#include "mixprec/core/error.h"
#include "mixprec/core/spelling.h"

namespace mixprec::python {

FormatRef find_format(const std::string& name) {
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const NonDTypeFormat& f : kNonDTypeFormats)
    if (in_comma_list(f.spellings, lower)) return {f.format->name, f.format, nullptr};
  try {
    const DTypeInfo& row = info(parse_dtype(name));
    return {row.name, row.format, &row};
  } catch (const Error&) {
    throw UsageError("unknown format '" + name + "'; valid: " + dtype_names() +
                     ", tf32, e2m1, e8m0");
  }
}

}  // namespace mixprec::python

namespace mixprec::python {

ConvertOptions convert_options(const std::string& rounding, bool saturate,
                               const std::string& overflow, uint64_t seed, uint64_t stream,
                               uint64_t index_base) {
  return {.rounding = parse_rounding(rounding),
          .saturate = saturate,
          .overflow = parse_overflow_convention(overflow),
          .seed = seed,
          .stream = stream,
          .index_base = index_base};
}

}  // namespace mixprec::python
