#include "value_parse.h"

#include <bit>
#include <cctype>
#include <cerrno>
#include <cstdlib>

namespace mixprec::cli {
namespace {

std::optional<uint32_t> parse_hex_u32(const std::string& s) {
  std::string digits = s;
  if (digits.size() > 2 && digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X'))
    digits = digits.substr(2);
  if (digits.empty() || digits.size() > 8) return std::nullopt;
  uint32_t v = 0;
  for (char c : digits) {
    if (!std::isxdigit(static_cast<unsigned char>(c))) return std::nullopt;
    v = v * 16 +
        static_cast<uint32_t>(std::isdigit(static_cast<unsigned char>(c))
                                  ? c - '0'
                                  : std::tolower(static_cast<unsigned char>(c)) - 'a' + 10);
  }
  return v;
}

}  // namespace

std::optional<ParsedValue> parse_value(const std::string& token) {
  if (token.rfind("bits:", 0) == 0) {
    const auto bits = parse_hex_u32(token.substr(5));
    if (!bits) return std::nullopt;
    return ParsedValue{static_cast<double>(std::bit_cast<float>(*bits)), true, *bits};
  }
  // " -inf" / " -nan": the form main() gives negative specials so CLI11 takes them as values.
  const std::string text =
      token.size() > 1 && token[0] == ' ' && token[1] == '-' ? token.substr(1) : token;
  if (text.empty() || std::isspace(static_cast<unsigned char>(text[0]))) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size()) return std::nullopt;
  if (errno == ERANGE) return std::nullopt;  // beyond f64's range: not silently 0 or inf
  return ParsedValue{v, false, 0};
}

}  // namespace mixprec::cli
