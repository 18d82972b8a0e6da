#include "mixprec/core/utf8.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "mixprec/numerics/philox.h"

namespace mixprec {
namespace {

std::string bytes(std::initializer_list<int> b) {
  std::string s;
  for (int x : b) s.push_back(static_cast<char>(x));
  return s;
}

// Independent reference: decode one sequence by the textbook bit arithmetic, then reject what
// the decoded value rules out (overlong for its length, surrogate, past U+10FFFF).
bool reference_valid_sequence(const std::string& s) {
  const auto u = [&](std::size_t i) { return static_cast<uint8_t>(s[i]); };
  const std::size_t n = s.size();
  std::size_t len;
  uint32_t cp;
  if (u(0) < 0x80) {
    len = 1, cp = u(0);
  } else if ((u(0) & 0xE0) == 0xC0) {
    len = 2, cp = u(0) & 0x1F;
  } else if ((u(0) & 0xF0) == 0xE0) {
    len = 3, cp = u(0) & 0x0F;
  } else if ((u(0) & 0xF8) == 0xF0) {
    len = 4, cp = u(0) & 0x07;
  } else {
    return false;
  }
  if (n != len) return false;
  for (std::size_t i = 1; i < len; ++i) {
    if ((u(i) & 0xC0) != 0x80) return false;
    cp = cp << 6 | (u(i) & 0x3F);
  }
  const uint32_t min_for_len[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < min_for_len[len]) return false;
  if (cp >= 0xD800 && cp <= 0xDFFF) return false;
  return cp <= 0x10FFFF;
}

TEST(Utf8, AcceptsWellFormedText) {
  EXPECT_TRUE(is_valid_utf8(""));
  EXPECT_TRUE(is_valid_utf8("plain ASCII\n\t"));
  EXPECT_TRUE(is_valid_utf8(std::string("nul \0 inside", 12)));
  EXPECT_TRUE(
      is_valid_utf8("G\xC3\xB6"
                    "del \xE2\x82\xAC \xF0\x9F\x98\x80"));      // ö € 😀
  EXPECT_TRUE(is_valid_utf8(bytes({0xF4, 0x8F, 0xBF, 0xBF})));  // U+10FFFF
  EXPECT_TRUE(is_valid_utf8(bytes({0xEF, 0xBF, 0xBF})));        // U+FFFF
}

TEST(Utf8, ReportsTheFirstBadSequence) {
  EXPECT_EQ(first_invalid_utf8(bytes({'a', 0xC0, 0x80})), 1u);             // overlong NUL
  EXPECT_EQ(first_invalid_utf8(bytes({0xE0, 0x80, 0x80})), 0u);            // overlong
  EXPECT_EQ(first_invalid_utf8(bytes({'x', 'y', 0xED, 0xA0, 0x80})), 2u);  // surrogate D800
  EXPECT_EQ(first_invalid_utf8(bytes({0xF4, 0x90, 0x80, 0x80})), 0u);      // U+110000
  EXPECT_EQ(first_invalid_utf8(bytes({0xF5, 0x80, 0x80, 0x80})), 0u);
  EXPECT_EQ(first_invalid_utf8(bytes({'o', 'k', 0x80})), 2u);    // lone continuation
  EXPECT_EQ(first_invalid_utf8(bytes({'a', 0xE2, 0x82})), 1u);   // truncated at the end
  EXPECT_EQ(first_invalid_utf8(bytes({0xE2, 0x28, 0xA1})), 0u);  // bad continuation
  EXPECT_EQ(first_invalid_utf8(bytes({0xC3, 0xA9, 0xFF})), 2u);  // 0xFF never appears
}

// Every sequence of 1, 2 and 3 bytes against the reference decoder.
TEST(Utf8, MatchesReferenceOnEveryShortSequence) {
  int64_t mismatches = 0;
  for (uint32_t v = 0; v < (1u << 24); ++v) {
    for (std::size_t len = 1; len <= 3; ++len) {
      if (len < 3 && (v >> (8 * len)) != 0) continue;  // each shorter string once
      std::string s;
      for (std::size_t i = 0; i < len; ++i) s.push_back(static_cast<char>(v >> (8 * i)));
      // One well-formed scalar of this many bytes, or several ASCII bytes, or invalid.
      bool ref = reference_valid_sequence(s);
      if (!ref) {
        // Split forms (e.g. "a" + "b", or a 2-byte char + ASCII) are valid too.
        ref = true;
        for (std::size_t i = 0; i < len && ref;) {
          std::size_t step = 0;
          for (std::size_t k = 1; k <= len - i; ++k) {
            if (reference_valid_sequence(s.substr(i, k))) step = k;
          }
          if (step == 0) ref = false;
          i += step;
        }
      }
      mismatches += is_valid_utf8(s) != ref;
    }
  }
  EXPECT_EQ(mismatches, 0);
}

// 4-byte sequences with a 4-byte lead: a random sample plus the range edges.
TEST(Utf8, MatchesReferenceOnFourByteSequences) {
  int64_t mismatches = 0;
  for (uint64_t i = 0; i < 2'000'000; ++i) {
    const uint32_t r = philox_u32(11, 0, i);
    const std::string s = bytes({0xF0 | static_cast<int>(r & 7), static_cast<int>(r >> 8 & 0xFF),
                                 static_cast<int>(r >> 16 & 0xFF), static_cast<int>(r >> 24)});
    mismatches += is_valid_utf8(s) != reference_valid_sequence(s);
  }
  EXPECT_EQ(mismatches, 0);
}

// Rust's String::from_utf8_lossy (what tokenizers' decoders give): one U+FFFD per maximal
// subpart, so a truncated 4-byte sequence is one replacement and a surrogate's bytes three.
TEST(Utf8, LossyReplacesEachMaximalSubpart) {
  const std::string r = "\xEF\xBF\xBD";
  EXPECT_EQ(utf8_lossy("a\xF0\x9F\x98"
                       "b"),
            "a" + r + "b");
  EXPECT_EQ(utf8_lossy("\xED\xA0\x80"), r + r + r);
  EXPECT_EQ(utf8_lossy("\xC0\xAF"), r + r);
  EXPECT_EQ(utf8_lossy("\xE2\x82"), r);
  EXPECT_EQ(utf8_lossy("\xF4\x90\x80\x80"), r + r + r + r);
  EXPECT_EQ(utf8_lossy("caf\xC3\xA9 \xF0\x9F\x98\x80"), "caf\xC3\xA9 \xF0\x9F\x98\x80");
  EXPECT_EQ(utf8_lossy(""), "");
}

}  // namespace
}  // namespace mixprec
