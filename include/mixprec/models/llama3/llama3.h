// The llama3 family (model.kind = "llama3"): torchtitan's Llama 3: RMSNorm, RoPE with
// model.rope_theta, SwiGLU sized by model.multiple_of, grouped-query attention, no biases, an
// untied output and torchtitan's initialisation; Hugging Face as LlamaForCausalLM.
#pragma once

#include "mixprec/models/registry.h"

namespace mixprec::models::llama3 {

extern const ModelSpec kSpec;

}  // namespace mixprec::models::llama3
