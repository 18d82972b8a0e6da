// Strict UTF-8 validation (RFC 3629): rejects overlong forms, surrogates (U+D800..U+DFFF),
// code points above U+10FFFF and truncated sequences. The corpus reader uses it to decide
// which files are text, the config loader which overrides can be written back, and the
// tokenizers which text they encode.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace mixprec {

// One step through bytes from bytes[i] (i < size): a valid sequence and its length, or the
// maximal invalid subpart there (Unicode's "maximal subpart": the bytes that could still have
// begun a valid sequence, at least 1).
struct Utf8Step {
  std::size_t length;
  bool valid;
};
Utf8Step utf8_step(std::string_view bytes, std::size_t i);

// nullopt when `bytes` is valid UTF-8, else the offset of the first byte of the first bad
// sequence.
std::optional<std::size_t> first_invalid_utf8(std::string_view bytes);

inline bool is_valid_utf8(std::string_view bytes) {
  return !first_invalid_utf8(bytes);
}

// Bytes as text, each maximal invalid subpart replaced by one U+FFFD (Rust's
// String::from_utf8_lossy, which Hugging Face `tokenizers` decoders use).
std::string utf8_lossy(std::string_view bytes);

}  // namespace mixprec
