#include "mixprec/numerics/rounding.h"

#include <cctype>
#include <string>

#include "mixprec/core/error.h"

namespace mixprec {

Rounding parse_rounding(std::string_view text) {
  std::string name(text);
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (name == "rne" || name == "nearest" || name == "nearest_even") return Rounding::nearest_even;
  if (name == "rtz" || name == "toward_zero" || name == "truncate") return Rounding::toward_zero;
  if (name == "stochastic" || name == "sr") return Rounding::stochastic;
  throw Error("rounding",
              "unknown rounding mode '" + std::string(text) + "'; valid: rne, rtz, stochastic");
}

const char* rounding_name(Rounding r) {
  switch (r) {
    case Rounding::nearest_even:
      return "rne";
    case Rounding::toward_zero:
      return "rtz";
    case Rounding::stochastic:
      return "stochastic";
  }
  return "?";
}

OverflowConvention parse_overflow_convention(std::string_view text) {
  std::string name(text);
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (name == "satfinite") return OverflowConvention::satfinite;
  if (name == "ml_dtypes") return OverflowConvention::ml_dtypes;
  throw Error("overflow convention", "unknown overflow convention '" + std::string(text) +
                                         "'; valid: satfinite, ml_dtypes");
}

const char* overflow_convention_name(OverflowConvention c) {
  return c == OverflowConvention::ml_dtypes ? "ml_dtypes" : "satfinite";
}

}  // namespace mixprec
