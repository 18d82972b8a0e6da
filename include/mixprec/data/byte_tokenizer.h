// Byte-level tokenizer: vocabulary 256, token = byte value. Lossless for any byte string
// (UTF-8 or not), so it needs no training and no vocabulary file.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "mixprec/tensor/tensor.h"

namespace mixprec::data {

class ByteTokenizer {
 public:
  static constexpr int64_t kVocabSize = 256;

  std::vector<int64_t> encode(std::string_view text) const;
  // Throws mixprec::Error naming the position and value of a token outside [0, 256).
  std::string decode(std::span<const int64_t> tokens) const;
  // Every element of an integer tensor (any shape, row-major order).
  std::string decode(const Tensor& tokens) const;
};

}  // namespace mixprec::data
