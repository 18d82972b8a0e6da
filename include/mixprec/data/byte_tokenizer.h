// Byte-level tokenizer: vocabulary 256, token = byte value. Lossless for any byte string
// (UTF-8 or not), so it needs no training and no vocabulary file.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "mixprec/data/tokenizer.h"
#include "mixprec/tensor/tensor.h"

namespace mixprec::data {

class ByteTokenizer final : public Tokenizer {
 public:
  static constexpr int64_t kVocabSize = 256;

  std::string id() const override { return "byte256"; }
  std::string describe() const override { return "byte-level (256 ids)"; }
  int64_t vocab_size() const override { return kVocabSize; }
  std::vector<int64_t> encode(std::string_view text) const override;
  // Throws mixprec::Error naming the position and value of a token outside [0, 256).
  std::string decode(std::span<const int64_t> tokens) const override;
  // Every element of an integer tensor (any shape, row-major order).
  std::string decode(const Tensor& tokens) const;
};

}  // namespace mixprec::data
