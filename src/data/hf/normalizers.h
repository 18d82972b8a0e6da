// tokenizer.json `normalizer`: Sequence, NFC, NFD, NFKC, NFKD, Lowercase, Strip,
// StripAccents, Prepend, Replace. Other types are refused naming the type and the key.
#pragma once

#include <memory>
#include <string>

#include "json_field.h"

namespace mixprec::data::hf {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual std::string normalize(std::string text) const = 0;
};

std::unique_ptr<Normalizer> make_normalizer(const JsonField& spec);

}  // namespace mixprec::data::hf
