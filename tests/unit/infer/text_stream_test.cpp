// TextStream: the text printed token by token equals the whole-text decode, for a decoder that
// is not a concatenation (sentencepiece-like: no leading space, byte tokens joined into UTF-8,
// a stray byte shown as U+FFFD).
#include "mixprec/infer/text_stream.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace mixprec::infer {
namespace {

// Ids 0..3 are words with a leading space marker, 100 + b is the byte b.
std::string piecewise_decode(std::span<const int64_t> ids) {
  static const char* const words[] = {"_the", "_caf", "_\xC3\xA9t\xC3\xA9", "s"};
  std::string raw;
  for (const int64_t id : ids)
    raw += id >= 100 ? std::string(1, static_cast<char>(id - 100)) : words[id];
  std::string out;
  for (std::size_t i = 0; i < raw.size();) {
    const auto c = static_cast<unsigned char>(raw[i]);
    const std::size_t need = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
    bool ok = need > 0 && i + need <= raw.size();
    for (std::size_t k = 1; ok && k < need; ++k)
      ok = (static_cast<unsigned char>(raw[i + k]) & 0xC0) == 0x80;
    if (!ok) {
      out += "\xEF\xBF\xBD";
      ++i;
      continue;
    }
    out += raw[i] == '_' ? std::string(" ") : raw.substr(i, need);
    i += need;
  }
  return out.starts_with(" ") ? out.substr(1) : out;
}

std::string streamed(const std::vector<int64_t>& start, const std::vector<int64_t>& tokens) {
  std::string printed;
  TextStream stream(
      piecewise_decode, [&](std::string_view s) { printed += s; }, start);
  for (const int64_t t : tokens) stream.push(t);
  stream.finish();
  return printed;
}

TEST(TextStream, PrintsWhatTheWholeDecodeGives) {
  std::mt19937 rng(7);
  const std::vector<int64_t> bytes = {100 + 0xC3, 100 + 0xA9, 100 + 0xE2, 100 + 0x82,
                                      100 + 0xAC, 100 + 'x',  100 + 0xA9};
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<int64_t> start = {0, 1}, tokens, all = start;
    const int n = static_cast<int>(rng() % 300);
    for (int i = 0; i < n; ++i) {
      const int64_t t = rng() % 2 ? static_cast<int64_t>(rng() % 4) : bytes[rng() % bytes.size()];
      tokens.push_back(t);
      all.push_back(t);
    }
    EXPECT_EQ(streamed(start, tokens), piecewise_decode(all)) << "trial " << trial;
  }
}

TEST(TextStream, HoldsBackAnUnfinishedCharacterUntilItIsComplete) {
  std::string printed;
  TextStream stream(piecewise_decode, [&](std::string_view s) { printed += s; });
  stream.push(0);
  stream.push(100 + 0xE2);
  EXPECT_EQ(printed, "the");  // the first byte of a 3-byte character waits
  stream.push(100 + 0x82);
  stream.push(100 + 0xAC);
  EXPECT_EQ(printed, "the\xE2\x82\xAC");
}

TEST(TextStream, UnsettledTail) {
  EXPECT_EQ(unsettled_tail("ab"), 0u);
  EXPECT_EQ(unsettled_tail("a\xC3"), 1u);
  EXPECT_EQ(unsettled_tail("a\xC3\xA9"), 0u);
  EXPECT_EQ(unsettled_tail("a\xF0\x9F\x98"), 3u);
  EXPECT_EQ(unsettled_tail("a\xEF\xBF\xBD"), 3u);
  EXPECT_EQ(unsettled_tail("a\xEF\xBF\xBD\xEF\xBF\xBD"), 6u);
}

}  // namespace
}  // namespace mixprec::infer
