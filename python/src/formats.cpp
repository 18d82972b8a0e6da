#include "formats.h"

namespace mixprec::python {

FormatRef find_format(const std::string& name) {
  if (auto r = find_named_format(name)) return *r;
  throw UsageError(unknown_format_message(name));
}

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
