// The Unicode facts a tokenizer.json pipeline needs, as Rust's `char` methods and Hugging Face
// `tokenizers` define them: stepping through UTF-8, whitespace, letters/digits/punctuation by
// general category (utf8proc) and the four normalization forms (utf8proc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace mixprec::data::hf {

// The code point starting at text[i] (valid UTF-8 assumed) and its length in bytes.
struct CodePoint {
  char32_t value;
  std::size_t length;
};
CodePoint code_point_at(std::string_view text, std::size_t i);
void append_utf8(std::string& out, char32_t c);

// Rust's char::is_whitespace (the White_Space property).
bool is_whitespace(char32_t c);
// Rust's char::is_alphanumeric (letters and numbers by general category).
bool is_alphanumeric(char32_t c);
// Rust's char::is_numeric: general categories Nd, Nl, No.
bool is_numeric(char32_t c);
// tokenizers' is_punctuation: ASCII punctuation or a Unicode P* category.
bool is_punctuation(char32_t c);
// Unicode Mn (what StripAccents removes after NFD).
bool is_nonspacing_mark(char32_t c);
// Full lowercase mapping where utf8proc has one (simple mapping otherwise).
std::string to_lowercase(std::string_view text);

enum class NormalForm { nfc, nfd, nfkc, nfkd };
std::string normalize_form(std::string_view text, NormalForm form);

}  // namespace mixprec::data::hf
