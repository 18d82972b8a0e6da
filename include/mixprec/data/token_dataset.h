// A language-model dataset: a corpus as one token stream (byte tokenizer), cached and mapped,
// split into train and validation.
//
// Split: the validation split is the LAST floor(size * validation_fraction) tokens of the
// stream, the train split everything before. Files are concatenated in corpus order, so the
// validation text is the tail of the last files; a split by token count keeps the two sizes
// exact whatever the document lengths (fortunes has a few very large files).
//
// Files that are not valid UTF-8 are skipped with a warning, not an error: corpus folders
// often hold stray binaries (fortunes ships binary index files), and a skip is as
// deterministic as the files themselves. The cache header records how many were skipped.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <utility>

#include "mixprec/data/corpus.h"
#include "mixprec/data/token_cache.h"

namespace mixprec::data {

// A contiguous run of tokens and a name for error messages. Holds the mapping alive.
struct TokenSplit {
  std::shared_ptr<const void> owner;  // keeps the tokens alive (the mapping, or any buffer)
  std::span<const uint8_t> tokens;
  std::string name;  // e.g. "train split of /run/tokens-....bin"
  int64_t size() const { return static_cast<int64_t>(tokens.size()); }
};

struct DatasetOptions {
  CorpusSpec corpus;
  std::filesystem::path cache_dir;   // the run directory (created when missing)
  double validation_fraction = 0.1;  // in [0, 1)
  WarningSink warn;                  // null: warnings go to stderr
};

class TokenDataset {
 public:
  // Lists the corpus, reuses <cache_dir>/tokens-<fingerprint>.bin when it is valid, else
  // (re)builds it; then maps it read-only. Errors name the path at fault.
  static TokenDataset open(const DatasetOptions& options);

  int64_t size() const { return static_cast<int64_t>(cache_.tokens().size()); }
  TokenSplit all() const;
  TokenSplit train() const;
  TokenSplit validation() const;

  const std::filesystem::path& cache_path() const { return cache_.file->path(); }
  uint64_t source_hash() const { return cache_.header.source_hash; }
  uint64_t payload_checksum() const { return cache_.header.payload_checksum; }  // of the tokens
  // True when open() wrote the cache file, false when it reused a valid one.
  bool rebuilt() const { return rebuilt_; }
  int64_t num_files() const { return cache_.header.file_count; }
  int64_t num_skipped_files() const { return cache_.header.skipped_count; }

 private:
  TokenDataset(TokenCache cache, int64_t train_size, bool rebuilt)
      : cache_(std::move(cache)), train_size_(train_size), rebuilt_(rebuilt) {}
  TokenSplit split(int64_t begin, int64_t end, const std::string& what) const;

  TokenCache cache_;
  int64_t train_size_;
  bool rebuilt_;
};

}  // namespace mixprec::data
