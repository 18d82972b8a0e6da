// The moe family (model.kind = "moe"): the decoder with a mixture of experts as every block's
// MLP from model.moe.n_dense_layers on (Switch / Mixtral routing, and DeepSeek-V3's as
// torchtitan's deepseek_v3 MoE has it: sigmoid scores, group-limited top-k, shared experts,
// auxiliary-loss-free expert biases), models/transformer/moe.h. No Hugging Face layout yet.
#pragma once

#include "mixprec/models/registry.h"

namespace mixprec::models::moe {

extern const ModelSpec kSpec;

}  // namespace mixprec::models::moe
