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

}  // namespace mixprec
