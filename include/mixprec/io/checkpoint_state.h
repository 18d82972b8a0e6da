// The training state a checkpoint holds, as one flat map of named tensors:
//
//   model.<parameter name>   each Parameter's master (f32, or the narrow master of the pure
//                            modes), as stored: a round trip is bit-exact
//   optim.<key>              the optimizer's StateDict ("optim.step", "optim.fc.w.exp_avg", ...)
//   scaler.<key>             GradScaler::checkpoint_dict() ("scaler.scale", ...)
//   buffer.<name>            a model's buffers (models::Model::buffers(): the MoE expert
//                            biases), f32
//   fp8_scaling.<key>        a delayed FP8 recipe's amax histories and scales
//                            (DelayedScaling::checkpoint_dict())
//
// Working copies are not saved: they are the masters rounded, and restore refreshes them.
// Restoring validates every entry first (missing, unknown, mis-shaped or mis-typed) and only
// then changes the objects, so a failed restore leaves them exactly as they were.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "mixprec/amp/delayed_scaling.h"
#include "mixprec/amp/grad_scaler.h"
#include "mixprec/io/checkpoint_store.h"
#include "mixprec/optim/optimizer.h"

namespace mixprec::io {

inline constexpr const char* kModelPrefix = "model.";
inline constexpr const char* kOptimPrefix = "optim.";
inline constexpr const char* kScalerPrefix = "scaler.";
inline constexpr const char* kBufferPrefix = "buffer.";
inline constexpr const char* kFp8ScalingPrefix = "fp8_scaling.";

// What to save or restore; optimizer and scaler are optional (null: not part of the state).
struct TrainingState {
  optim::ParamList params;
  optim::Optimizer* optimizer = nullptr;
  amp::GradScaler* scaler = nullptr;
  // A model's buffers (restored in place): each needs its entry, of its shape, f32, finite.
  std::vector<std::pair<std::string, Tensor>> buffers{};
  // A delayed recipe's state (null: none). Restored when the checkpoint has its entries; a
  // checkpoint without them (written under another recipe) starts every tensor at scale 1, and
  // a run without one ignores them (the recipe was changed on purpose).
  amp::DelayedScaling* delayed_scaling = nullptr;
};

// The state as named tensors (copies: later training does not change them).
TensorMap flatten_training_state(const TrainingState& state);

// Loads `tensors` into the existing objects. Every parameter needs its "model." entry with the
// master's shape and dtype, and no "model." entry may name an unknown parameter; the optimizer
// and the scaler (when given) need their complete state. Entries under other prefixes, or of
// parts not given, are ignored (a fine-tune may restore the model only). Throws mixprec::Error
// naming the entry at fault; nothing is modified then. A "buffer." entry that names no buffer
// is an error only when buffers are given.
void restore_training_state(const TensorMap& tensors, const TrainingState& state);

}  // namespace mixprec::io
