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

// What `saturate` and toward-zero rounding do at the edge of the format, where peers disagree
// (README, "Overflow conventions"):
//   satfinite  (the default) saturate sends finite overflow and +-inf inputs to +-max finite,
//              as CUDA's __NV_SATFINITE and torchao's clamp do; toward-zero rounding of a
//              finite overflow gives +-max finite, as IEEE 754 roundTowardZero does.
//   ml_dtypes  as ml_dtypes' ConvertImpl<kSaturate, kTruncate>: saturate clamps finite
//              overflow only, +-inf stay +-inf (NaN in e4m3fn, which has no inf); toward-zero
//              rounding (truncation) of a finite overflow gives inf (NaN in e4m3fn) unless
//              saturate is on.
// Both leave NaN NaN and agree everywhere else.
enum class OverflowConvention : uint8_t { satfinite, ml_dtypes };

struct ConvertOptions {
  Rounding rounding = Rounding::nearest_even;
  // Overflow goes to +-max finite instead of inf (or NaN for e4m3fn), as FP8 training recipes
  // do; +-inf inputs too under the satfinite convention. NaN stays NaN.
  bool saturate = false;
  OverflowConvention overflow = OverflowConvention::satfinite;
  // Stochastic rounding only: element i of a call draws its random number from
  // Philox4x32-10 keyed by `seed`, at counter (index_base + i, stream), so the bits depend
  // on neither thread count nor call order.
  uint64_t seed = 0;
  uint64_t stream = 0;
  uint64_t index_base = 0;
};

Rounding parse_rounding(std::string_view name);  // "rne" | "rtz" | "stochastic" (and "sr")
const char* rounding_name(Rounding r);
OverflowConvention parse_overflow_convention(std::string_view name);  // satfinite | ml_dtypes
const char* overflow_convention_name(OverflowConvention c);

}  // namespace mixprec
