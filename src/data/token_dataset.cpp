#include "mixprec/data/token_dataset.h"

#include <cmath>
#include <iostream>

#include "mixprec/core/error.h"
#include "mixprec/data/byte_tokenizer.h"
#include "mixprec/data/token_files.h"

namespace mixprec::data {
namespace fs = std::filesystem;
namespace {

// Tokens [begin, end) of a stream whose token 0 sits at byte `base` of `file`.
TokenSplit split_of(std::shared_ptr<const void> owner, const TokenSpan& all, int64_t begin,
                    int64_t end, const std::string& name, const fs::path& file, int64_t base) {
  return TokenSplit{std::move(owner), all.sub(begin, end), name + " of " + file.string(),
                    file.string(), base + begin * all.width()};
}

int64_t validation_tokens(int64_t n, double fraction) {
  return static_cast<int64_t>(std::floor(static_cast<double>(n) * fraction));
}

// The train file a data path names: the path itself, or a nanoGPT folder's train.bin.
std::optional<fs::path> token_train_file(const CorpusSpec& spec) {
  if (spec.paths.size() != 1) return std::nullopt;
  const fs::path& p = spec.paths[0];
  std::error_code ec;
  if (fs::is_regular_file(p, ec) && is_token_file(p)) return p;
  if (fs::is_directory(p, ec) && fs::is_regular_file(p / "train.bin", ec)) return p / "train.bin";
  return std::nullopt;
}

}  // namespace

std::string TokenSplit::where(int64_t i) const {
  const int64_t offset = file_offset + i * tokens.width();
  return "byte offset " + std::to_string(offset) + " (token " + std::to_string(i) + " of the " +
         name + ")";
}

TokenDataset TokenDataset::open(const DatasetOptions& options) {
  const double f = options.validation_fraction;
  MIXPREC_CHECK(f >= 0.0 && f < 1.0, "data",
                "validation_fraction " + std::to_string(f) + " is not in [0, 1)");
  if (const auto train = token_train_file(options.corpus)) return open_token_files(*train, f);
  return open_text(options);
}

TokenDataset TokenDataset::open_token_files(const fs::path& train_path, double fraction) {
  const TokenFile train = open_token_file(train_path);
  const std::optional<fs::path> val_path = validation_file_for(train_path);
  TokenDataset d;
  d.vocab_size_ = train.vocab_size;
  std::vector<CorpusFile> listed = list_corpus_files({{train_path}, {}});
  if (val_path) {
    const TokenFile val = open_token_file(*val_path);
    MIXPREC_CHECK(
        val.format == train.format, "data " + val_path->string(),
        "is " + val.format + ", its train file " + train_path.string() + " is " + train.format);
    d.train_ = split_of(train.file, train.tokens, 0, train.tokens.size(), "train file", train_path,
                        train.header_bytes);
    d.validation_ = split_of(val.file, val.tokens, 0, val.tokens.size(), "validation file",
                             *val_path, val.header_bytes);
    const std::vector<CorpusFile> v = list_corpus_files({{*val_path}, {}});
    listed.insert(listed.end(), v.begin(), v.end());
    d.source_ = train.format + " files " + train_path.string() + ", " + val_path->string();
  } else {
    const int64_t n = train.tokens.size(), nv = validation_tokens(n, fraction);
    d.train_ = split_of(train.file, train.tokens, 0, n - nv, "train split", train_path,
                        train.header_bytes);
    d.validation_ = split_of(train.file, train.tokens, n - nv, n, "validation split", train_path,
                             train.header_bytes);
    d.source_ = train.format + " file " + train_path.string();
  }
  d.fingerprint_ = d.source_hash_ = corpus_fingerprint(listed, train.format);
  d.num_files_ = static_cast<int64_t>(listed.size());
  return d;
}

TokenDataset TokenDataset::open_text(const DatasetOptions& options) {
  MIXPREC_CHECK(!options.cache_dir.empty(), "data", "no cache directory given");
  const WarningSink warn = options.warn ? options.warn : [](const std::string& message) {
    std::cerr << "warning: " << message << '\n';
  };
  const ByteTokenizer bytes;
  const Tokenizer& tokenizer = options.tokenizer ? *options.tokenizer : bytes;
  std::error_code ec;
  fs::create_directories(options.cache_dir, ec);
  MIXPREC_CHECK(!ec, "data cache " + options.cache_dir.string(),
                "cannot create the directory: " + ec.message());

  const std::vector<CorpusFile> files = list_corpus_files(options.corpus);
  const uint64_t hash = corpus_fingerprint(files, tokenizer.id());
  const fs::path path = options.cache_dir / token_cache_file_name(hash);
  const int64_t vocab = tokenizer.vocab_size();

  std::string why;
  std::optional<TokenCache> cache = open_token_cache(path, hash, vocab, &why);
  TokenDataset d;
  d.rebuilt_ = !cache;
  if (!cache) {
    if (why != "missing") warn("data cache " + path.string() + ": rebuilding (" + why + ")");
    build_token_cache(path, files, hash, tokenizer, warn);
    cache = open_token_cache(path, hash, vocab, &why);
    MIXPREC_CHECK(cache, "data cache " + path.string(), "invalid right after writing: " + why);
  } else if (cache->header.skipped_count > 0) {
    warn("data cache " + path.string() + ": reused; " +
         std::to_string(cache->header.skipped_count) +
         " corpus file(s) were skipped as not valid UTF-8 when it was built");
  }
  const TokenSpan all = cache->tokens();
  const int64_t n = all.size(), nv = validation_tokens(n, options.validation_fraction);
  constexpr int64_t kHeader = sizeof(TokenCacheHeader);
  d.train_ = split_of(cache->file, all, 0, n - nv, "train split", path, kHeader);
  d.validation_ = split_of(cache->file, all, n - nv, n, "validation split", path, kHeader);
  d.source_ = "cache " + path.string();
  d.fingerprint_ = cache->header.payload_checksum;
  d.source_hash_ = hash;
  d.vocab_size_ = vocab;
  d.num_files_ = cache->header.file_count;
  d.num_skipped_ = cache->header.skipped_count;
  d.cache_path_ = path;
  return d;
}

}  // namespace mixprec::data
