// The run's dataset from its config.
#include "mixprec/train/run_data.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "mixprec/core/error.h"
#include "mixprec/data/byte_tokenizer.h"
#include "mixprec/data/corpus.h"

namespace mixprec::train {

// Every token id must index the embedding: the byte tokenizer's ids reach 255. A larger
// vocabulary is a config meant for another tokenizer (GPT-2's 50257): rows no token reaches,
// never trained; padding up to a multiple of 64 (nanoGPT's 50304) is the only slack allowed.
void check_vocabulary(const data::TokenDataset& ds, int64_t vocab_size) {
  constexpr int64_t kTokenizerVocab = data::ByteTokenizer::kVocabSize;
  constexpr int64_t kPadded = (kTokenizerVocab + 63) / 64 * 64;
  MIXPREC_CHECK(vocab_size <= kPadded, "model.vocab_size",
                std::to_string(vocab_size) + " is larger than the data's vocabulary: the byte " +
                    "tokenizer has " + std::to_string(kTokenizerVocab) + " token ids, so " +
                    std::to_string(vocab_size - kTokenizerVocab) +
                    " embedding rows would never be trained (use " +
                    std::to_string(kTokenizerVocab) + ")");
  const data::TokenSplit all = ds.all();
  const auto it = std::max_element(all.tokens.begin(), all.tokens.end());
  if (it == all.tokens.end() || *it < vocab_size) return;
  throw Error("training.data",
              "token id " + std::to_string(*it) + " at position " +
                  std::to_string(it - all.tokens.begin()) + " of " + ds.cache_path().string() +
                  " is outside the vocabulary: model.vocab_size = " + std::to_string(vocab_size) +
                  " (the byte tokenizer needs 256)");
}

data::TokenDataset open_run_data(const config::TrainConfig& c,
                                 const std::filesystem::path& cache_dir, data::WarningSink warn) {
  data::DatasetOptions o;
  if (c.training.data.empty()) {
    o.corpus = data::default_corpus();
  } else {
    MIXPREC_CHECK(std::filesystem::exists(c.training.data), "training.data",
                  "'" + c.training.data + "' does not exist");
    o.corpus.paths = {c.training.data};
  }
  o.cache_dir = cache_dir;
  o.validation_fraction = c.training.val_fraction;
  o.warn = std::move(warn);
  return data::TokenDataset::open(o);
}

// Entropy (nats per token) of the split's token frequencies: the loss of the best model that
// ignores context, the bar a language model must get well below.
double unigram_entropy(const data::TokenSplit& split) {
  std::vector<int64_t> counts(256, 0);
  for (const uint8_t t : split.tokens) ++counts[t];
  double h = 0;
  const double n = static_cast<double>(split.size());
  for (const int64_t c : counts)
    if (c > 0) h -= static_cast<double>(c) / n * std::log(static_cast<double>(c) / n);
  return h;
}

}  // namespace mixprec::train
