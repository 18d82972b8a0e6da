// What turns text into token ids and back: the byte tokenizer (the default: 256 ids, no
// training, lossless), a Hugging Face tokenizer.json or a sentencepiece model
// ([model] tokenizer = PATH). Datasets, the token
// cache, evaluation per byte and `sample` see a tokenizer only through this interface.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mixprec::data {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Identifies the vocabulary (a token cache built with another one is rebuilt).
  virtual std::string id() const = 0;
  // One line for logs: "byte-level (256 ids)", "sentencepiece bpe, 4096 ids (PATH)".
  virtual std::string describe() const = 0;
  virtual int64_t vocab_size() const = 0;
  // Ids of the text alone, no BOS or EOS.
  virtual std::vector<int64_t> encode(std::string_view text) const = 0;
  // Throws mixprec::Error naming the position and value of an id outside the vocabulary.
  virtual std::string decode(std::span<const int64_t> ids) const = 0;
  // Put before and after each document of a corpus, when the vocabulary has them.
  virtual std::optional<int64_t> bos() const { return std::nullopt; }
  virtual std::optional<int64_t> eos() const { return std::nullopt; }
};

// The byte tokenizer for "", a Hugging Face tokenizer.json for a *.json path or a folder holding
// tokenizer.json, else the sentencepiece model at `path` (an Error naming it when it cannot be
// read or is not a model).
std::unique_ptr<Tokenizer> open_tokenizer(const std::string& path);

// [bos] + encode(text) + [eos]: one document of a corpus.
std::vector<int64_t> encode_document(const Tokenizer& tokenizer, std::string_view text);

}  // namespace mixprec::data
