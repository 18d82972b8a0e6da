// The gpt family (model.kind = "gpt"): the decoder with a dense MLP in every block and GPT-2's
// initialisation, configurable as GPT-2 / nanoGPT (LayerNorm, GELU, learned positions, biases)
// or Llama-shaped (RMSNorm, SwiGLU, RoPE); Hugging Face as GPT-2 or Llama accordingly.
#pragma once

#include "mixprec/models/registry.h"

namespace mixprec::models::gpt {

extern const ModelSpec kSpec;

}  // namespace mixprec::models::gpt
