// The run's dataset and tokenizer from its config.
#include "mixprec/train/run_data.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "mixprec/core/error.h"
#include "mixprec/data/corpus.h"

namespace mixprec::train {

std::unique_ptr<data::Tokenizer> open_run_tokenizer(const config::TrainConfig& c) {
  try {
    return data::open_tokenizer(c.model.tokenizer);
  } catch (const Error& e) {
    throw Error("model.tokenizer", e.what());
  }
}

void check_vocabulary(const data::TokenDataset& ds, int64_t vocab_size) {
  const std::optional<int64_t> data_vocab = ds.vocab_size();
  if (!data_vocab) return;  // raw ids: each batch checks its own
  const int64_t v = *data_vocab, padded = (v + 63) / 64 * 64;
  const std::string whose =
      "the data's vocabulary (" + ds.source() + ") has " + std::to_string(v) + " ids";
  if (vocab_size < v) {
    // Text the run tokenised itself may use fewer ids than its tokenizer has (ASCII bytes):
    // only an id the data holds must fit. Token files are not read up front.
    MIXPREC_CHECK(!ds.cache_path().empty(), "model.vocab_size",
                  std::to_string(vocab_size) + " is smaller than the data's: " + whose +
                      ", so some would have no embedding row (use " + std::to_string(v) + ")");
    for (const data::TokenSplit* split : {&ds.train(), &ds.validation()}) {
      int64_t worst = -1, at = 0;
      for (int64_t i = 0; i < split->size(); ++i)
        if (split->tokens[i] > worst) worst = split->tokens[i], at = i;
      MIXPREC_CHECK(
          worst < vocab_size, "training.data",
          "token id " + std::to_string(worst) + " at " + split->where(at) +
              " is outside the vocabulary: model.vocab_size = " + std::to_string(vocab_size) +
              " (the tokenizer has " + std::to_string(v) + " ids)");
    }
  }
  MIXPREC_CHECK(vocab_size <= padded, "model.vocab_size",
                std::to_string(vocab_size) + " is larger than the data's: " + whose + ", so " +
                    std::to_string(vocab_size - v) +
                    " embedding rows would never be trained (use " + std::to_string(v) +
                    ", or a multiple of 64 up to " + std::to_string(padded) + ")");
}

data::TokenDataset open_run_data(const config::TrainConfig& c,
                                 const std::filesystem::path& cache_dir,
                                 const data::Tokenizer& tokenizer, data::WarningSink warn) {
  data::DatasetOptions o;
  if (c.training.data.empty()) {
    o.corpus = data::default_corpus();
  } else {
    std::error_code ec;  // a symlink loop or an unreadable folder: named, not a raw fs error
    const bool exists = std::filesystem::exists(c.training.data, ec);
    MIXPREC_CHECK(!ec, "training.data",
                  "cannot examine '" + c.training.data + "': " + ec.message());
    MIXPREC_CHECK(exists, "training.data", "'" + c.training.data + "' does not exist");
    o.corpus.paths = {c.training.data};
  }
  o.cache_dir = cache_dir;
  o.validation_fraction = c.training.val_fraction;
  o.warn = std::move(warn);
  o.tokenizer = &tokenizer;
  return data::TokenDataset::open(o);
}

double unigram_entropy(const data::TokenSplit& split, int64_t vocab_size) {
  const int64_t n = std::min<int64_t>(split.size(), int64_t{1} << 24);
  // Ids outside the vocabulary are not counted (the batches refuse them, naming where).
  std::vector<int64_t> counts(static_cast<std::size_t>(std::max<int64_t>(vocab_size, 1)), 0);
  std::vector<int64_t> ids(std::size_t{1} << 16);
  for (int64_t at = 0; at < n; at += static_cast<int64_t>(ids.size())) {
    const int64_t m = std::min(n - at, static_cast<int64_t>(ids.size()));
    split.tokens.read(at, m, ids.data());  // a block at a time: one read, not one per token
    for (int64_t i = 0; i < m; ++i) {
      const auto t = static_cast<std::size_t>(ids[static_cast<std::size_t>(i)]);
      if (t < counts.size()) ++counts[t];
    }
  }
  double h = 0;
  const double total = static_cast<double>(n);
  for (const int64_t c : counts)
    if (c > 0) h -= static_cast<double>(c) / total * std::log(static_cast<double>(c) / total);
  return h;
}

}  // namespace mixprec::train
