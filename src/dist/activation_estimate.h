// What a training step's forward saves for backward, and the largest short-lived buffers of
// the loss and block backwards, for a models::Transformer under a precision policy. Derived
// from what each op's backward node keeps in this codebase (activation_estimate.cpp lists
// them op by op); private to src/dist (memory_plan.cpp walks the step with it).
#pragma once

#include <cstddef>
#include <cstdint>

#include "mixprec/amp/policy.h"
#include "mixprec/config/train_config.h"

namespace mixprec::dist::detail {

struct ActivationEstimate {
  std::size_t batch = 0;                    // inputs + targets, i64 [B, T] each
  std::size_t root_saved = 0;               // final norm, LM head input, logits and loss statistics
  std::size_t block_saved = 0;              // one transformer block (all blocks are alike)
  int64_t blocks = 0;                       // model.n_layers
  std::size_t kept_after_backward = 0;      // router logits the model keeps for its stats
  std::size_t forward_transient = 0;        // the loss's f32 copy of narrow logits
  std::size_t loss_backward_transient = 0;  // cross-entropy backward: f32 logits + gradient
  std::size_t block_backward_transient = 0;  // the largest gradient buffers inside a block
  std::size_t saved() const { return root_saved + block_saved * static_cast<std::size_t>(blocks); }
  // The activations term of the plan: the batch, everything saved, and the larger of the
  // transients (the loss backward one at the start of backward).
  std::size_t total() const;
};

// `sequences` x `seq_len` tokens through the model described by `model`.
ActivationEstimate estimate_activations(const config::ModelConfig& model,
                                        const amp::MixedPrecisionPolicy& policy, int64_t sequences,
                                        int64_t seq_len);

}  // namespace mixprec::dist::detail
