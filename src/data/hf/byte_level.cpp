#include "byte_level.h"

#include "unicode_text.h"

namespace mixprec::data::hf {
namespace {

bool prints(unsigned b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
}

struct Alphabet {
  std::array<char32_t, 256> code{};
  std::array<std::string, 256> utf8;
  Alphabet() {
    char32_t next = 256;
    for (unsigned b = 0; b < 256; ++b) {
      code[b] = prints(b) ? static_cast<char32_t>(b) : next++;
      append_utf8(utf8[b], code[b]);
    }
  }
};

const Alphabet& alphabet() {
  static const Alphabet a;
  return a;
}

}  // namespace

const std::string& byte_level_char(unsigned char b) {
  return alphabet().utf8[b];
}

std::optional<unsigned char> byte_level_byte(char32_t c) {
  if (c < 256) {
    if (prints(static_cast<unsigned>(c))) return static_cast<unsigned char>(c);
    return std::nullopt;
  }
  if (c >= 256 + 68) return std::nullopt;  // 68 bytes do not print
  for (unsigned b = 0; b < 256; ++b)
    if (alphabet().code[b] == c) return static_cast<unsigned char>(b);
  return std::nullopt;
}

std::string to_byte_level(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char ch : bytes) out += byte_level_char(static_cast<unsigned char>(ch));
  return out;
}

}  // namespace mixprec::data::hf
