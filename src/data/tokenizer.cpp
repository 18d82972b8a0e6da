#include "mixprec/data/tokenizer.h"

#include <filesystem>

#include "mixprec/core/error.h"

#include "mixprec/data/byte_tokenizer.h"
#include "mixprec/data/hf_tokenizer.h"
#include "mixprec/data/sentencepiece_tokenizer.h"

namespace mixprec::data {

std::unique_ptr<Tokenizer> open_tokenizer(const std::string& path) {
  if (path.empty()) return std::make_unique<ByteTokenizer>();
  if (is_hf_tokenizer_path(path)) return HfTokenizer::open(path);
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {  // a Hugging Face folder of the older kind
    const auto model = std::filesystem::path(path) / "tokenizer.model";
    MIXPREC_CHECK(std::filesystem::exists(model, ec), "tokenizer " + path,
                  "is a folder with neither tokenizer.json nor tokenizer.model");
    return open_sentencepiece(model.string());
  }
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
