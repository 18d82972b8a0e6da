// Validation loss of a model: mean token cross-entropy over the first `max_batches` batches of
// the validation split (all of them when max_batches <= 0), without gradients, under the
// policy's autocast. The same split and batch count give the same batches in every run.
#pragma once

#include <cstdint>

#include "mixprec/amp/delayed_scaling.h"
#include "mixprec/amp/policy.h"
#include "mixprec/data/batches.h"
#include "mixprec/data/tokenizer.h"
#include "mixprec/dist/parallelism.h"
#include "mixprec/models/model.h"
#include "mixprec/train/step_metrics.h"

namespace mixprec::train {

// A collective: each rank evaluates its rows of every batch (parallelism.local_rows) and the
// losses add up over ranks, so every rank returns the same metrics.
EvalMetrics evaluate(models::Model& model, dist::Parallelism& parallelism,
                     const data::ValidationBatches& batches, int64_t max_batches,
                     const amp::MixedPrecisionPolicy& policy, int64_t step,
                     amp::DelayedScaling* delayed = nullptr);

// UTF-8 bytes of the text whose tokens evaluate() predicts (the targets of the same batches),
// decoded by `tokenizer`: the denominator of the loss per byte.
int64_t evaluated_text_bytes(const data::ValidationBatches& batches, int64_t max_batches,
                             const data::Tokenizer& tokenizer);
// Sets m.val_loss_per_byte from the evaluated text's bytes (none: left 0, unknown).
void set_loss_per_byte(EvalMetrics& m, int64_t text_bytes);

}  // namespace mixprec::train
