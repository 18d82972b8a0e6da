#include "mixprec/core/utf8.h"

#include <cstdint>

namespace mixprec {

Utf8Step utf8_step(std::string_view bytes, std::size_t i) {
  const auto* s = reinterpret_cast<const uint8_t*>(bytes.data());
  const std::size_t n = bytes.size();
  const uint8_t b = s[i];
  if (b < 0x80) return {1, true};
  // Length and the allowed range of the second byte (Unicode 15, table 3-7): the narrowed
  // ranges after E0, ED, F0 and F4 exclude overlongs, surrogates and values past U+10FFFF.
  std::size_t len;
  uint8_t lo = 0x80, hi = 0xBF;
  if (b >= 0xC2 && b <= 0xDF) {
    len = 2;
  } else if (b >= 0xE0 && b <= 0xEF) {
    len = 3;
    if (b == 0xE0) lo = 0xA0;
    if (b == 0xED) hi = 0x9F;
  } else if (b >= 0xF0 && b <= 0xF4) {
    len = 4;
    if (b == 0xF0) lo = 0x90;
    if (b == 0xF4) hi = 0x8F;
  } else {
    return {1, false};  // a continuation byte, C0/C1 (overlong) or F5..FF
  }
  std::size_t good = 1;  // bytes that could still begin a valid sequence
  while (good < len && i + good < n) {
    const uint8_t c = s[i + good];
    if (good == 1 ? (c < lo || c > hi) : (c < 0x80 || c > 0xBF)) break;
    ++good;
  }
  return {good, good == len};
}

std::optional<std::size_t> first_invalid_utf8(std::string_view bytes) {
  for (std::size_t i = 0; i < bytes.size();) {
    const Utf8Step step = utf8_step(bytes, i);
    if (!step.valid) return i;
    i += step.length;
  }
  return std::nullopt;
}

std::string utf8_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (std::size_t i = 0; i < bytes.size();) {
    const Utf8Step step = utf8_step(bytes, i);
    if (step.valid)
      out.append(bytes.substr(i, step.length));
    else
      out += "\xEF\xBF\xBD";
    i += step.length;
  }
  return out;
}

}  // namespace mixprec
