// Training checkpoints as the trainer writes and reads them, on top of io::CheckpointStore:
//
//   tensors   model.* / optim.* / scaler.* (io/checkpoint_state.h), plus
//             train.step (i64: completed steps = the data position; batches and stochastic
//             rounding are keyed by it) and train.seed (i64: the data and rounding seed)
//   metadata  format = "mixprec.train/1", step, config (the run's TOML, config::to_toml),
//             tokenizer (the fingerprint data::Tokenizer::id() of the run's tokenizer),
//             bf16_kernel (the kernel its bf16 products ran on: a resumed run keeps it)
//
// Loading checks the file, then the model: a checkpoint of another model is an error naming
// the first model.* key whose value differs and the first tensor that does not fit.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "mixprec/config/train_config.h"
#include "mixprec/data/tokenizer.h"
#include "mixprec/dist/parallelism.h"
#include "mixprec/io/checkpoint_state.h"
#include "mixprec/io/checkpoint_store.h"
#include "mixprec/models/registry.h"

namespace mixprec::train {

inline constexpr const char* kCheckpointFormat = "mixprec.train/1";

// Saves the state after `step` completed steps (as dist::Parallelism::full_training_state
// gives it) of a run whose tokenizer is `tokenizer_id`; returns the path written.
std::string save_run_checkpoint(io::CheckpointStore& store, int64_t step, io::TensorMap tensors,
                                const config::TrainConfig& config,
                                const std::string& tokenizer_id = "",
                                const std::string& bf16_kernel = "");
// The kernel a checkpoint's run took for bf16 products ("" in older checkpoints).
std::string checkpoint_bf16_kernel(const io::Checkpoint& checkpoint);

// The config a checkpoint was written with (its metadata), or an Error naming the file.
config::TrainConfig checkpoint_config(const io::Checkpoint& checkpoint);
// Completed steps recorded in the checkpoint.
int64_t checkpoint_step(const io::Checkpoint& checkpoint);

// Restores `state` from `checkpoint` after checking that it was written for the same model
// as `config` (and the same training.seed) and that its contents are plausible
// (train/checkpoint_plausibility.h). Nothing changes on error.
void restore_run_checkpoint(const io::Checkpoint& checkpoint, const io::TrainingState& state,
                            const config::TrainConfig& config);

// For eval and sample: the model of a checkpoint file, or of the newest valid checkpoint in
// a run directory (its checkpoint folder), with master weights restored and working copies
// under the checkpoint's precision policy (or `policy`, e.g. sampling in fp32 from a
// bf16-mixed run; its master dtype must be the checkpoint's), held by a single process's
// parallelism.
struct LoadedModel {
  config::TrainConfig config;
  std::unique_ptr<models::Model> model;
  std::unique_ptr<dist::Communicator> comm;
  std::unique_ptr<dist::Parallelism> parallelism;  // holds *model over *comm
  int64_t step = 0;
  std::string path;
  std::string tokenizer_id;  // the run's tokenizer (metadata); empty in older checkpoints
};
LoadedModel load_model(const std::string& checkpoint_or_run_dir,
                       const std::optional<amp::MixedPrecisionPolicy>& policy = std::nullopt);

// The tokenizer of a loaded model's run (model.tokenizer), refused when it is not the one the
// checkpoint was trained with.
std::unique_ptr<data::Tokenizer> open_checkpoint_tokenizer(const LoadedModel& loaded);

}  // namespace mixprec::train
