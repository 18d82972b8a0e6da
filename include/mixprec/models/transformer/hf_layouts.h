// The Hugging Face layouts of the shared decoder (models/hf_layout.h): Llama
// (LlamaForCausalLM) for RMSNorm + SwiGLU + RoPE models without biases, GPT-2
// (GPT2LMHeadModel) for LayerNorm + GELU + learned-position models without grouped-query
// attention. GPT-2 stores Conv1D weights [in, out] and fuses q/k/v into c_attn.
//
// RoPE: our rope() rotates the halves (i, i + Dh/2) of each head, which is Hugging Face's
// layout, so q and k rows go across as they are. (Meta's and torchtitan's checkpoints rotate
// interleaved pairs (2i, 2i + 1); HF's conversion script permutes their q/k rows into this
// layout, and a model trained here needs no such permutation.)
#pragma once

#include "mixprec/config/train_config.h"
#include "mixprec/models/hf_layout.h"

namespace mixprec::models {

HfLayout llama_hf_layout(const config::ModelConfig& m);
HfLayout gpt2_hf_layout(const config::ModelConfig& m);
// The one of the two the config's architecture fits; an Error naming its keys otherwise.
HfLayout dense_decoder_hf_layout(const config::ModelConfig& m);

}  // namespace mixprec::models
