// Generated text printed as the tokens come, equal to decoding them all at the end.
//
// A tokenizer's decode is not a concatenation of pieces: sentencepiece drops the first
// piece's leading space and joins byte-fallback tokens into one UTF-8 character. So each new
// token decodes together with the tokens since an anchor, and only what that decode adds to the
// text already printed is emitted, holding back an unfinished UTF-8 sequence (or up to 3
// trailing U+FFFD, which a later byte may turn into a character). When everything decoded so far is
// printed, the anchor moves up to the last few tokens, which stay as context: memory and time
// per token stay bounded however long the text.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mixprec::infer {

class TextStream {
 public:
  using Decode = std::function<std::string(std::span<const int64_t>)>;
  using Emit = std::function<void(std::string_view)>;
  // `start`: tokens whose text comes first (the prompt), emitted by the first push or finish.
  TextStream(Decode decode, Emit emit, std::vector<int64_t> start = {});

  void push(int64_t token);
  // Emits whatever was held back (an unfinished character as its bytes).
  void finish();

 private:
  void emit_ready(bool everything);

  Decode decode_;
  Emit emit_;
  std::vector<int64_t> pending_;  // the anchor's context tokens, then the newer ones
  std::size_t printed_ = 0;       // bytes of decode(pending_) already emitted
};

// Bytes at the end of `text` that may still change as tokens follow: an unfinished UTF-8
// sequence, or up to 3 trailing U+FFFD.
std::size_t unsettled_tail(std::string_view text);

}  // namespace mixprec::infer
