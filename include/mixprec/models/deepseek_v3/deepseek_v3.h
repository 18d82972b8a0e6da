// The deepseek_v3 family (model.kind = "deepseek_v3"): torchtitan's deepseek_v3 model,
// Hugging Face's DeepseekV3ForCausalLM. Multi-head latent attention ([model.mla]: low-rank
// queries and a shared key/value latent with their RMSNorms, the decoupled RoPE part, YaRN's
// softmax correction), and the moe family's experts ([model.moe]: stacked routed experts,
// sigmoid or softmax scores, group-limited top-k, shared experts, dense first blocks,
// auxiliary-loss-free expert biases); RMSNorm, SwiGLU, no biases; torchtitan's init.
// torchtitan's multi-token prediction is off by default there and not built here.
#pragma once

#include "mixprec/models/registry.h"

namespace mixprec::models::deepseek_v3 {

extern const ModelSpec kSpec;

}  // namespace mixprec::models::deepseek_v3
