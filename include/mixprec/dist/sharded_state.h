// Checkpoints of a sharded run in the format of an unsharded one (io/checkpoint_state.h), so
// a checkpoint written at any world size loads at any other (resharding on load):
//
//   save  every rank all-gathers each unit's master shard and each elementwise optimizer
//         buffer (exp_avg, exp_avg_sq, momentum, Kahan compensation) and cuts the flat unit
//         back into full parameters; Adam-mini's per-block "vmean" takes each block's value
//         from the rank holding the block's first element; per-parameter step counts are the
//         same on every rank that holds a piece. Every rank gets the whole map (rank 0 writes).
//   load  every rank reads the full map and keeps the slices of its own pieces.
#pragma once

#include "mixprec/amp/grad_scaler.h"
#include "mixprec/dist/sharded_model.h"
#include "mixprec/io/checkpoint_state.h"

namespace mixprec::dist {

// The training state as io::flatten_training_state gives it for the same model unsharded.
// A collective: every rank must call it.
io::TensorMap gather_training_state(const ShardedModel& model, const optim::Optimizer* optimizer,
                                    const amp::GradScaler* scaler);

// The entries of a full state that this rank's pieces need, keyed as the pieces' own
// flatten_training_state would key them (entries of other prefixes pass through unchanged).
// A parameter missing from `full` is left out (restore then names it).
io::TensorMap shard_training_state(const io::TensorMap& full, const ShardedModel& model);

}  // namespace mixprec::dist
