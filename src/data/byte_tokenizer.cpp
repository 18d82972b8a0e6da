#include "mixprec/data/byte_tokenizer.h"

#include "mixprec/core/error.h"

namespace mixprec::data {

std::vector<int64_t> ByteTokenizer::encode(std::string_view text) const {
  std::vector<int64_t> tokens(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) tokens[i] = static_cast<unsigned char>(text[i]);
  return tokens;
}

std::string ByteTokenizer::decode(std::span<const int64_t> tokens) const {
  std::string text(tokens.size(), '\0');
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    MIXPREC_CHECK(tokens[i] >= 0 && tokens[i] < kVocabSize, "ByteTokenizer::decode",
                  "token " + std::to_string(tokens[i]) + " at position " + std::to_string(i) +
                      " is outside the vocabulary [0, 256)");
    text[i] = static_cast<char>(static_cast<unsigned char>(tokens[i]));
  }
  return text;
}

std::string ByteTokenizer::decode(const Tensor& tokens) const {
  const DType dt = tokens.dtype();
  MIXPREC_CHECK(dt == DType::i64 || dt == DType::i32 || dt == DType::u8, "ByteTokenizer::decode",
                std::string("token tensor holds ") + dtype_name(dt) + ", expected i64, i32 or u8");
  const Tensor flat = tokens.to(DType::i64).contiguous();
  return decode(
      std::span<const int64_t>(flat.data<int64_t>(), static_cast<std::size_t>(flat.numel())));
}

}  // namespace mixprec::data
