#include "mixprec/numerics/format_names.h"

#include <algorithm>
#include <cctype>

#include "mixprec/core/error.h"
#include "mixprec/core/spelling.h"

namespace mixprec {

std::optional<NamedFormat> find_named_format(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const NonDTypeFormat& f : kNonDTypeFormats)
    if (in_comma_list(f.spellings, lower)) return NamedFormat{f.format->name, f.format, nullptr};
  try {
    const DTypeInfo& row = info(parse_dtype(std::string(name)));
    return NamedFormat{row.name, row.format, &row};
  } catch (const Error&) {
    return std::nullopt;
  }
}

std::string unknown_format_message(std::string_view name) {
  return "unknown format '" + std::string(name) + "'; valid: " + dtype_names() +
         ", tf32, e2m1, e8m0";
}

}  // namespace mixprec
