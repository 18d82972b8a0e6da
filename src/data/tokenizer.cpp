#include "mixprec/data/tokenizer.h"

#include "mixprec/data/byte_tokenizer.h"
#include "mixprec/data/sentencepiece_tokenizer.h"

namespace mixprec::data {

std::unique_ptr<Tokenizer> open_tokenizer(const std::string& path) {
  if (path.empty()) return std::make_unique<ByteTokenizer>();
  return open_sentencepiece(path);
}

std::vector<int64_t> encode_document(const Tokenizer& tokenizer, std::string_view text) {
  std::vector<int64_t> ids;
  if (const auto bos = tokenizer.bos()) ids.push_back(*bos);
  const std::vector<int64_t> body = tokenizer.encode(text);
  ids.insert(ids.end(), body.begin(), body.end());
  if (const auto eos = tokenizer.eos()) ids.push_back(*eos);
  return ids;
}

}  // namespace mixprec::data
