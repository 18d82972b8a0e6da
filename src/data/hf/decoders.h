// tokenizer.json `decoder`: turns the tokens of ids back into text, as tokenizers' decode
// chain (each step maps the list of token strings). ByteLevel, Metaspace, Replace,
// ByteFallback, Fuse, Strip, Sequence; other types are refused naming the type.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "json_field.h"

namespace mixprec::data::hf {

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual std::vector<std::string> decode_chain(std::vector<std::string> tokens) const = 0;
};

std::unique_ptr<Decoder> make_decoder(const JsonField& spec);

}  // namespace mixprec::data::hf
