// A language-model dataset: train and validation token streams, from text or from token files.
//
// Text (files, folders, JSONL): tokenised by the run's tokenizer into a cache in the run
// directory (token_cache.h), opened, and split: the validation split is the LAST
// floor(size * validation_fraction) tokens of the stream, the train split everything before.
// Files are concatenated in corpus order, so the validation text is the tail of the last files;
// a split by token count keeps the two sizes exact whatever the document lengths (fortunes has
// a few very large files). Files that are not valid UTF-8 are skipped with a warning, not an
// error: corpus folders often hold stray binaries (fortunes ships binary index files), and a
// skip is as deterministic as the files themselves.
//
// Token files (token_files.h: nanoGPT's and llm.c's *.bin): read in place, nothing read
// up front. A train file with its validation file beside it (train.bin / val.bin,
// x_train.bin / x_val.bin) gives the two splits; alone, it is split as text is. A folder
// holding train.bin is taken as nanoGPT's pair.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "mixprec/data/corpus.h"
#include "mixprec/data/token_cache.h"
#include "mixprec/data/token_span.h"
#include "mixprec/data/tokenizer.h"

namespace mixprec::data {

// A contiguous run of tokens, where they come from (for errors naming the file and offset),
// and what keeps them alive.
struct TokenSplit {
  std::shared_ptr<const void> owner;  // keeps the tokens alive (the open file, or any buffer)
  TokenSpan tokens;
  std::string name;         // e.g. "train split of /run/tokens-....bin"
  std::string file;         // the file the tokens are in ("" for a buffer)
  int64_t file_offset = 0;  // byte offset of tokens[0] in that file
  int64_t size() const { return tokens.size(); }
  // "byte offset 1048 (token 512) of FILE" for the token at index i of the split.
  std::string where(int64_t i) const;
};

struct DatasetOptions {
  CorpusSpec corpus;
  std::filesystem::path cache_dir;       // the run directory (created when missing)
  double validation_fraction = 0.1;      // in [0, 1)
  WarningSink warn;                      // null: warnings go to stderr
  const Tokenizer* tokenizer = nullptr;  // text only; null: the byte tokenizer
};

class TokenDataset {
 public:
  // Text: lists the corpus, reuses <cache_dir>/tokens-<fingerprint>.bin when it is valid,
  // else (re)builds it, then opens it. Token files: opens them. Errors name the path at fault.
  static TokenDataset open(const DatasetOptions& options);

  int64_t size() const { return train_.size() + validation_.size(); }
  const TokenSplit& train() const { return train_; }
  const TokenSplit& validation() const { return validation_; }

  // Where the tokens come from, for the run log ("cache PATH", "llm.c GPT-2 uint16 file PATH").
  const std::string& source() const { return source_; }
  // Equal on every machine that reads the same data (ranks compare it): the cache's payload
  // checksum, or the token files' paths, sizes and times.
  uint64_t fingerprint() const { return fingerprint_; }
  // The vocabulary the ids come from: the tokenizer's for text, the format's for llm.c files,
  // nullopt for nanoGPT's raw ids (they are checked batch by batch instead).
  std::optional<int64_t> vocab_size() const { return vocab_size_; }
  bool rebuilt() const { return rebuilt_; }  // open() wrote the cache (text only)
  // The corpus fingerprint that names the cache (text), or of the token files.
  uint64_t source_hash() const { return source_hash_; }
  int64_t num_files() const { return num_files_; }
  int64_t num_skipped_files() const { return num_skipped_; }
  const std::filesystem::path& cache_path() const { return cache_path_; }  // "" for token files

 private:
  TokenDataset() = default;
  static TokenDataset open_text(const DatasetOptions& options);
  static TokenDataset open_token_files(const std::filesystem::path& train, double fraction);

  TokenSplit train_, validation_;
  std::string source_;
  uint64_t fingerprint_ = 0, source_hash_ = 0;
  std::optional<int64_t> vocab_size_;
  bool rebuilt_ = false;
  int64_t num_files_ = 0, num_skipped_ = 0;
  std::filesystem::path cache_path_;
};

}  // namespace mixprec::data
