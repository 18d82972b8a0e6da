#include "mixprec/infer/text_stream.h"

#include <algorithm>
#include <utility>

namespace mixprec::infer {
namespace {

// Tokens kept as context when the anchor moves: enough for a tokenizer's decode to treat the
// next token as it would in the middle of the text (spacing, a word it continues).
constexpr std::size_t kContextTokens = 8;
// The anchor moves once this many tokens wait, so each push decodes a bounded span.
constexpr std::size_t kMaxPending = 64;

}  // namespace

std::size_t unsettled_tail(std::string_view text) {
  // U+FFFD: a decoder's stand-in for each byte of a character it has not seen whole (at most
  // 3 of them before the last byte comes).
  constexpr std::string_view kReplacement = "\xEF\xBF\xBD";
  std::size_t replaced = 0;
  while (replaced < 3 * kReplacement.size() &&
         text.substr(0, text.size() - replaced).ends_with(kReplacement))
    replaced += kReplacement.size();
  if (replaced > 0) return replaced;
  // Back over at most 3 continuation bytes to a lead byte whose sequence is not complete.
  const std::size_t n = text.size();
  for (std::size_t back = 1; back <= std::min<std::size_t>(4, n); ++back) {
    const auto c = static_cast<unsigned char>(text[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte
    const std::size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return need > back ? back : 0;
  }
  return 0;
}

TextStream::TextStream(Decode decode, Emit emit, std::vector<int64_t> start)
    : decode_(std::move(decode)), emit_(std::move(emit)), pending_(std::move(start)) {}

void TextStream::push(int64_t token) {
  pending_.push_back(token);
  emit_ready(false);
}

void TextStream::finish() {
  emit_ready(true);
}

void TextStream::emit_ready(bool everything) {
  const std::string text = decode_(pending_);
  // The printed bytes stay a prefix of the decode (a tokenizer that rewrote them would show
  // here; what was printed cannot be taken back, so only the new bytes go out).
  std::size_t from = std::min(printed_, text.size());
  const std::size_t end = everything ? text.size() : text.size() - unsettled_tail(text);
  if (end > from) {
    emit_(std::string_view(text).substr(from, end - from));
    from = end;
  }
  printed_ = std::max(printed_, from);
  if (printed_ == text.size() && pending_.size() > kMaxPending) {
    pending_.erase(pending_.begin(), pending_.end() - kContextTokens);
    printed_ = decode_(pending_).size();
  }
}

}  // namespace mixprec::infer
