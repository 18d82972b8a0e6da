// Hugging Face `tokenizer.json` files (what Llama 3, Qwen 3, DeepSeek-V3, Mistral and GPT-2
// checkpoints ship, and what torchtitan reads): byte-level and sentencepiece-style BPE with
// their normalizers, pre-tokenizer regexes (on Oniguruma, as `tokenizers` runs them), added and
// special tokens, post-processor and decoder; BOS/EOS from tokenizer_config.json beside it.
// Encoding the same text gives the ids `tokenizers` gives (tests/reference/tokenizer_*).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "mixprec/data/tokenizer.h"

namespace mixprec::data {

class HfTokenizer final : public Tokenizer {
 public:
  // `path`: a tokenizer.json, or a folder holding one. Errors name the file and key at fault.
  static std::unique_ptr<HfTokenizer> open(const std::string& path);
  ~HfTokenizer() override;

  std::string id() const override;
  std::string describe() const override;
  int64_t vocab_size() const override;
  // `tokenizers`' encode(text, add_special_tokens=False). Text that is not UTF-8 is refused,
  // naming the byte offset.
  std::vector<int64_t> encode(std::string_view text) const override;
  // encode(text, add_special_tokens=True): the post-processor's template around the ids.
  std::vector<int64_t> encode_with_special_tokens(std::string_view text) const;
  // decode(ids, skip_special_tokens=False).
  std::string decode(std::span<const int64_t> ids) const override;
  std::string decode(std::span<const int64_t> ids, bool skip_special_tokens) const;
  // tokenizer_config.json's bos_token / eos_token; without that file, what the post-processor
  // puts before / after the text (one id each), if anything.
  std::optional<int64_t> bos() const override;
  std::optional<int64_t> eos() const override;
  std::optional<int64_t> token_to_id(std::string_view token) const;

  struct Impl;

 private:
  explicit HfTokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// True for a path open_tokenizer reads as tokenizer.json: a *.json or *.json.gz file, or a
// folder holding tokenizer.json (or only tokenizer.json.gz; tokenizer_config.json likewise).
bool is_hf_tokenizer_path(const std::string& path);

}  // namespace mixprec::data
