// Rounding modes and options for narrowing conversions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace mixprec {

enum class Rounding : uint8_t {
  nearest_even,  // IEEE round-to-nearest, ties to even (the default everywhere)
  toward_zero,   // truncation; a finite input never overflows (IEEE: clamps to +-max finite)
  stochastic,    // away from zero with probability = discarded fraction (see philox.h)
};

struct ConvertOptions {
  Rounding rounding = Rounding::nearest_even;
  // Overflow (and +-inf inputs) go to +-max finite instead of inf (or NaN for e4m3fn),
  // as FP8 training recipes do. NaN stays NaN.
  bool saturate = false;
  // Stochastic rounding only: element i of a call draws its random number from
  // Philox4x32-10 keyed by `seed`, at counter (index_base + i, stream), so the bits depend
  // on neither thread count nor call order.
  uint64_t seed = 0;
  uint64_t stream = 0;
  uint64_t index_base = 0;
};

Rounding parse_rounding(std::string_view name);  // "rne" | "rtz" | "stochastic" (and "sr")
const char* rounding_name(Rounding r);

}  // namespace mixprec
