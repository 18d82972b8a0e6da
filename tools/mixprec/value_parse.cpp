#include "value_parse.h"

#include <algorithm>
#include <bit>
#include <cctype>
#include <cerrno>
#include <cstdlib>

#include "usage_error.h"

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

namespace mixprec::cli {

WholeNumber parse_whole_number(const std::string& text, int64_t max, bool suffixes) {
  using Status = WholeNumber::Status;
  std::string body = text;
  int shift = 0;  // powers of ten from the suffix
  if (suffixes && !body.empty()) {
    const std::string units = "KMBT";  // any case: 10^3, 10^6, 10^9, 10^12
    const std::size_t u =
        units.find(static_cast<char>(std::toupper(static_cast<unsigned char>(body.back()))));
    if (u != std::string::npos) shift = 3 * static_cast<int>(u + 1);
    if (shift > 0) body.pop_back();
  }
  // digits [. digits] [e|E [+|-] digits]: the significand's digits and a decimal exponent.
  std::string digits;
  int64_t exponent = shift;
  std::size_t i = 0;
  bool any = false;
  for (; i < body.size() && std::isdigit(static_cast<unsigned char>(body[i])); ++i, any = true)
    digits += body[i];
  if (i < body.size() && body[i] == '.') {
    for (++i; i < body.size() && std::isdigit(static_cast<unsigned char>(body[i]));
         ++i, any = true) {
      digits += body[i];
      --exponent;
    }
  }
  if (!any) return {Status::malformed, 0};
  if (i < body.size() && (body[i] == 'e' || body[i] == 'E')) {
    ++i;
    bool negative = false;
    if (i < body.size() && (body[i] == '+' || body[i] == '-')) negative = body[i++] == '-';
    int64_t e = 0;
    bool e_any = false;
    for (; i < body.size() && std::isdigit(static_cast<unsigned char>(body[i])); ++i, e_any = true)
      e = std::min<int64_t>(e * 10 + (body[i] - '0'), int64_t{1} << 40);  // saturates: no wrap
    if (!e_any) return {Status::malformed, 0};
    exponent += negative ? -e : e;
  }
  if (i != body.size()) return {Status::malformed, 0};
  // Drop leading zeros; a negative exponent must only cut zeros off the end.
  const std::size_t first = digits.find_first_not_of('0');
  if (first == std::string::npos) return {Status::ok, 0};
  digits.erase(0, first);
  while (exponent < 0) {
    if (digits.back() != '0') return {Status::not_whole, 0};
    digits.pop_back();
    ++exponent;
  }
  // Exact, stopping as soon as the value passes max (which fits int64).
  if (static_cast<int64_t>(digits.size()) + exponent > 19) return {Status::too_large, 0};
  uint64_t v = 0;
  const auto limit = static_cast<uint64_t>(max);
  const auto times_ten_plus = [&](uint64_t d) {
    if (v > (limit - std::min(limit, d)) / 10) return false;  // checked before it could wrap
    v = v * 10 + d;
    return v <= limit;
  };
  for (const char c : digits)
    if (!times_ten_plus(static_cast<uint64_t>(c - '0'))) return {Status::too_large, 0};
  for (int64_t k = 0; k < exponent; ++k)
    if (!times_ten_plus(0)) return {Status::too_large, 0};
  return {Status::ok, static_cast<int64_t>(v)};
}

int64_t whole_number_option(const std::string& flag, const std::string& text, int64_t min,
                            int64_t max, bool suffixes, const std::string& why_max) {
  const WholeNumber n = parse_whole_number(text, max, suffixes);
  const std::string shown = flag + " '" + text + "'";
  switch (n.status) {
    case WholeNumber::Status::malformed:
      throw UsageError(shown + " is not a whole number (e.g. 1200, 4e6" +
                       std::string(suffixes ? ", 7B, 1.5M" : "") + ")");
    case WholeNumber::Status::not_whole:
      throw UsageError(shown + " is not a whole number");
    case WholeNumber::Status::too_large:
      throw UsageError(shown + " must be at most " + std::to_string(max) + " (" + why_max + ")");
    case WholeNumber::Status::ok:
      break;
  }
  if (n.value < min) throw UsageError(shown + " must be at least " + std::to_string(min));
  return n.value;
}

}  // namespace mixprec::cli
