// Strict UTF-8 validation (RFC 3629): rejects overlong forms, surrogates (U+D800..U+DFFF),
// code points above U+10FFFF and truncated sequences. The corpus reader uses it to decide
// which files are text, and the config loader which overrides can be written back.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace mixprec {

// nullopt when `bytes` is valid UTF-8, else the offset of the first byte of the first bad
// sequence.
std::optional<std::size_t> first_invalid_utf8(std::string_view bytes);

inline bool is_valid_utf8(std::string_view bytes) {
  return !first_invalid_utf8(bytes);
}

}  // namespace mixprec
