// The dataset a run trains on: training.data (a file or folder; "" = Debian's fortunes),
// tokenised and cached in `cache_dir` (data/token_dataset.h), split by training.val_fraction.
// Shared by the trainer and `mixprec eval` so both read the same tokens.
#pragma once

#include <filesystem>
#include <memory>

#include "mixprec/config/train_config.h"
#include "mixprec/data/token_dataset.h"
#include "mixprec/data/tokenizer.h"

namespace mixprec::train {

// model.tokenizer's tokenizer (the byte tokenizer when it is ""); errors name model.tokenizer.
std::unique_ptr<data::Tokenizer> open_run_tokenizer(const config::TrainConfig& config);

// Errors name training.data when the path does not exist. `warn` null: stderr.
data::TokenDataset open_run_data(const config::TrainConfig& config,
                                 const std::filesystem::path& cache_dir,
                                 const data::Tokenizer& tokenizer, data::WarningSink warn = {});

// An Error naming model.vocab_size when it does not fit the data's vocabulary (when the data
// says it): smaller leaves ids without an embedding row; larger than the vocabulary rounded up
// to a multiple of 64 (nanoGPT's 50304 padding) leaves rows no token trains.
void check_vocabulary(const data::TokenDataset& dataset, int64_t vocab_size);

// Entropy (nats per token) of the split's token frequencies over its first 2^24 tokens (ids
// below vocab_size): the loss of the best model that ignores context, the bar a language
// model must get well below.
double unigram_entropy(const data::TokenSplit& split, int64_t vocab_size);

}  // namespace mixprec::train
