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

// A whole number as the user typed it, read exactly (no double rounding, no wrap):
// "1200", "2e18", "1.5e3", and with `suffixes` also "7B", "1.5M" (K, M, B, T in any case: 10^3 ..
// 10^12). Values above `max` give too_large (the exact value may not fit any integer type).
struct WholeNumber {
  enum class Status { ok, malformed, not_whole, too_large } status = Status::malformed;
  int64_t value = 0;  // when ok
};
WholeNumber parse_whole_number(const std::string& text, int64_t max, bool suffixes);

// parse_whole_number for a command-line option: the value in [min, max], or a UsageError
// naming `flag` and the text as typed ("--world-size '4294967298' must be at most 1048576
// (why)").
int64_t whole_number_option(const std::string& flag, const std::string& text, int64_t min,
                            int64_t max, bool suffixes, const std::string& why_max);

}  // namespace mixprec::cli
