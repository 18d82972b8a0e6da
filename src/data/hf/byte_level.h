// GPT-2's byte-level alphabet: each byte is one printable code point (bytes that print map to
// themselves, the others to U+0100 on), so byte-level BPE vocabularies hold only text.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>

namespace mixprec::data::hf {

// The UTF-8 of byte b's code point.
const std::string& byte_level_char(unsigned char b);
// The byte a code point stands for, nullopt for code points outside the alphabet.
std::optional<unsigned char> byte_level_byte(char32_t c);
// Every byte of `bytes` as its code point.
std::string to_byte_level(std::string_view bytes);
// GPT-2's split regex (ByteLevel's use_regex).
inline constexpr std::string_view kGpt2SplitRegex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

}  // namespace mixprec::data::hf
