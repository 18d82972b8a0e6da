// What a training checkpoint's contents must satisfy beyond being well formed: a file whose
// checksums were recomputed can still hold a consistent but absurd state (a step of 2^62, a
// file named step-41 that holds step 7, counters past the step, weights the working dtype
// cannot hold, entries nothing reads, another tokenizer's ids). Each check throws an Error
// naming the file and the entry; none changes anything.
#pragma once

#include <cstdint>
#include <string>

#include "mixprec/amp/policy.h"
#include "mixprec/config/train_config.h"
#include "mixprec/data/tokenizer.h"
#include "mixprec/io/checkpoint_store.h"

namespace mixprec::train {

// The metadata key of the tokenizer's fingerprint (data::Tokenizer::id()).
inline constexpr const char* kTokenizerKey = "tokenizer";

// Every tensor belongs to a section a loader reads: model.*, optim.*, scaler.*, buffer.*,
// train.step, train.seed.
void check_known_entries(const io::Checkpoint& checkpoint);

// train.step against training.steps of the run resuming it; the scaler's step counters and
// the optimizer's step against train.step. (train::checkpoint_step checks it against the
// file's name: step-<N>.safetensors holds step N.)
void check_step_counters(const io::Checkpoint& checkpoint, int64_t step,
                         const config::TrainConfig& config);

// No finite model.* value past the working dtype's largest (policy.param_dtype: its cast is
// inf) or past sqrt(f32 max) = 1.8e19 (every norm's sum of squares overflows). inf and NaN are
// left to io::restore_training_state, which refuses them in its own scan.
void check_masters_fit(const io::Checkpoint& checkpoint, const amp::MixedPrecisionPolicy& policy);

// The tokenizer that is about to read or write ids for the checkpoint's model must be the one
// it was trained with (metadata `tokenizer`; absent in checkpoints written before it was kept).
void check_tokenizer(const io::Checkpoint& checkpoint, const data::Tokenizer& tokenizer,
                     const std::string& tokenizer_path);
void check_tokenizer(const std::string& recorded_id, const std::string& checkpoint_path,
                     const data::Tokenizer& tokenizer, const std::string& tokenizer_path);

}  // namespace mixprec::train
