// tokenizer.json `pre_tokenizer`: cuts normalized text into the pieces the model encodes one by
// one. Sequence, Split, ByteLevel, Metaspace, Digits, Whitespace, WhitespaceSplit,
// Punctuation, BertPreTokenizer, CharDelimiterSplit; other types are refused naming the type.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "json_field.h"

namespace mixprec::data::hf {

struct Piece {
  std::string text;
  // Starts where the whole input starts (Metaspace's prepend_scheme "first" reads it).
  bool at_start = false;
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Appends the pieces `piece` splits into (empty ones dropped, as tokenizers drops them).
  virtual void split(Piece piece, std::vector<Piece>& out) const = 0;
  std::vector<Piece> split_all(std::vector<Piece> pieces) const;
};

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const JsonField& spec);

}  // namespace mixprec::data::hf
