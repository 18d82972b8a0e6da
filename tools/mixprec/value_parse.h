// Parsing of the numbers users type at `mixprec dtype cast`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace mixprec::cli {

struct ParsedValue {
  double value;        // exact value of the input as f64 (an f32 input widens exactly)
  bool from_f32_bits;  // given as bits:0x........ (so the source format is f32)
  uint32_t f32_bits;   // valid when from_f32_bits
};

// Decimal ("0.1", "-3e-5"), hex float ("0x1.8p-3"), "inf"/"-inf"/"nan", or raw f32 bits
// ("bits:0x3F848000"). Returns nullopt for anything else.
std::optional<ParsedValue> parse_value(const std::string& token);

}  // namespace mixprec::cli
