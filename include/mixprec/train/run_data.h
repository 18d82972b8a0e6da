// The dataset a run trains on: training.data (a file or folder; "" = Debian's fortunes),
// tokenised and cached in `cache_dir` (data/token_dataset.h), split by training.val_fraction.
// Shared by the trainer and `mixprec eval` so both read the same tokens.
#pragma once

#include <filesystem>

#include "mixprec/config/train_config.h"
#include "mixprec/data/token_dataset.h"

namespace mixprec::train {

// Errors name training.data when the path does not exist. `warn` null: stderr.
data::TokenDataset open_run_data(const config::TrainConfig& config,
                                 const std::filesystem::path& cache_dir,
                                 data::WarningSink warn = {});

// An Error naming training.data when a token id is outside the vocabulary (the byte
// tokenizer's ids reach 255).
void check_vocabulary(const data::TokenDataset& dataset, int64_t vocab_size);

// Entropy (nats per token) of the split's token frequencies: the loss of the best model that
// ignores context, the bar a language model must get well below.
double unigram_entropy(const data::TokenSplit& split);

}  // namespace mixprec::train
