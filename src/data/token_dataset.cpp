#include "mixprec/data/token_dataset.h"

#include <cmath>
#include <iostream>

#include "mixprec/core/error.h"

namespace mixprec::data {
namespace fs = std::filesystem;

TokenDataset TokenDataset::open(const DatasetOptions& options) {
  const double f = options.validation_fraction;
  MIXPREC_CHECK(f >= 0.0 && f < 1.0, "data",
                "validation_fraction " + std::to_string(f) + " is not in [0, 1)");
  MIXPREC_CHECK(!options.cache_dir.empty(), "data", "no cache directory given");
  const WarningSink warn = options.warn ? options.warn : [](const std::string& message) {
    std::cerr << "warning: " << message << '\n';
  };
  std::error_code ec;
  fs::create_directories(options.cache_dir, ec);
  MIXPREC_CHECK(!ec, "data cache " + options.cache_dir.string(),
                "cannot create the directory: " + ec.message());

  const std::vector<CorpusFile> files = list_corpus_files(options.corpus);
  const uint64_t hash = corpus_fingerprint(files);
  const fs::path path = options.cache_dir / token_cache_file_name(hash);

  std::string why;
  std::optional<TokenCache> cache = open_token_cache(path, hash, &why);
  const bool rebuilt = !cache;
  if (!cache) {
    if (why != "missing") warn("data cache " + path.string() + ": rebuilding (" + why + ")");
    build_token_cache(path, files, hash, warn);
    cache = open_token_cache(path, hash, &why);
    MIXPREC_CHECK(cache, "data cache " + path.string(), "invalid right after writing: " + why);
  } else if (cache->header.skipped_count > 0) {
    warn("data cache " + path.string() + ": reused; " +
         std::to_string(cache->header.skipped_count) +
         " corpus file(s) were skipped as not valid UTF-8 when it was built");
  }
  const auto n = static_cast<int64_t>(cache->header.token_count);
  const auto n_validation = static_cast<int64_t>(std::floor(static_cast<double>(n) * f));
  return TokenDataset(std::move(*cache), n - n_validation, rebuilt);
}

TokenSplit TokenDataset::split(int64_t begin, int64_t end, const std::string& what) const {
  const auto b = static_cast<std::size_t>(begin), e = static_cast<std::size_t>(end);
  return TokenSplit{cache_.file, cache_.tokens().subspan(b, e - b),
                    what + " of " + cache_path().string()};
}

TokenSplit TokenDataset::all() const {
  return split(0, size(), "token stream");
}
TokenSplit TokenDataset::train() const {
  return split(0, train_size_, "train split");
}
TokenSplit TokenDataset::validation() const {
  return split(train_size_, size(), "validation split");
}

}  // namespace mixprec::data
