// The token cache: a corpus tokenised once into <dir>/tokens-<fingerprint>.bin, then read in
// place (token_span.h) on every later run while the sources and the tokenizer are unchanged.
//
// Documents: a text file is one; a JSONL file (*.jsonl, what Hugging Face `datasets` exports)
// holds one per line, its "text" field. Each document is [bos] + ids + [eos] when the
// tokenizer has those (sentencepiece); the byte tokenizer's documents are their bytes.
//
// File layout (little-endian, as on every supported target):
//   [0, 64)  TokenCacheHeader
//   [64, 64 + token_count * token_bytes)  the tokens, token_bytes = token_width(vocab_size)
// A file is used only if its size, magic, version, token width, vocabulary, fingerprint and
// payload checksum all match; anything else (truncation, a flipped bit, an old version) is
// reported by open_token_cache and the caller rebuilds. A rebuild writes a temporary file
// beside the target, fsyncs it, then renames it over the target (and fsyncs the directory),
// so readers see the old file or the new one, never a torn one. (A cache file truncated in
// place while a process reads it is an error naming the file in that process.)
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "mixprec/data/corpus.h"
#include "mixprec/data/token_span.h"
#include "mixprec/data/tokenizer.h"
#include "mixprec/io/regular_file.h"

namespace mixprec::data {

struct TokenCacheHeader {
  char magic[8];              // "MXPTOKEN"
  uint32_t version;           // kTokenCacheVersion
  uint32_t token_bytes;       // bytes per token on disk: 1, 2 or 4
  uint64_t vocab_size;        // the tokenizer's
  uint64_t token_count;       // tokens after the header
  uint64_t source_hash;       // corpus_fingerprint() of the files it was built from
  uint64_t payload_checksum;  // byte_checksum() of the tokens
  uint32_t file_count;        // corpus files listed
  uint32_t skipped_count;     // of which left out as not valid UTF-8
  uint64_t text_bytes;        // UTF-8 bytes of the documents' text (for loss per byte)
};
static_assert(sizeof(TokenCacheHeader) == 64, "the on-disk header is 64 bytes");

inline constexpr uint32_t kTokenCacheVersion = 2;

// "tokens-<16 hex digits>.bin"
std::string token_cache_file_name(uint64_t source_hash);

using WarningSink = std::function<void(const std::string&)>;

struct TokenCacheBuild {
  uint64_t token_count = 0;
  std::vector<std::filesystem::path> skipped;  // files that were not valid UTF-8
};

// Tokenises the files' documents (each file validated as UTF-8; a file that is not is skipped
// and reported through `warn`) into a new cache at `target`, atomically. Throws mixprec::Error
// naming the corpus when no token results, naming a file that cannot be read or changed size
// while being read, and naming the file and line of a JSONL line that is not an object with
// a string "text".
TokenCacheBuild build_token_cache(const std::filesystem::path& target,
                                  const std::vector<CorpusFile>& files, uint64_t source_hash,
                                  const Tokenizer& tokenizer, const WarningSink& warn);

// An open, validated cache file.
struct TokenCache {
  std::shared_ptr<const io::RegularFile> file;
  TokenCacheHeader header;
  TokenSpan tokens() const;
};

// The cache at `path` when it exists and is valid for `source_hash` and the tokenizer's
// vocabulary; otherwise nullopt and, when `why` is given, the reason ("missing",
// "truncated: ...", "checksum mismatch", ...).
std::optional<TokenCache> open_token_cache(const std::filesystem::path& path, uint64_t source_hash,
                                           int64_t vocab_size, std::string* why = nullptr);

}  // namespace mixprec::data
