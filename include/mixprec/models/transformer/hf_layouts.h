// The Hugging Face layouts of the shared decoder (models/hf_layout.h): Llama
// (LlamaForCausalLM) for RMSNorm + SwiGLU + RoPE models without biases or q/k norms, GPT-2
// (GPT2LMHeadModel) for LayerNorm + GELU + learned-position models without grouped-query
// attention, model.head_dim or q/k norms. GPT-2 stores Conv1D weights [in, out] and fuses
// q/k/v into c_attn.
//
// RoPE: our rope() rotates the halves (i, i + Dh/2) of each head, which is Hugging Face's
// layout, so q and k rows go across as they are. (Meta's and torchtitan's checkpoints rotate
// interleaved pairs (2i, 2i + 1); HF's conversion script permutes their q/k rows into this
// layout, and a model trained here needs no such permutation.)
#pragma once

#include <vector>

#include "mixprec/config/train_config.h"
#include "mixprec/models/hf_layout.h"

namespace mixprec::models {

// Llama's tensors (q_proj [n_heads·Dh, d], k/v_proj [n_kv_heads·Dh, d], o_proj [d, n_heads·Dh]
// with Dh = model.head_dim or d / n_heads), and with model.qk_norm each layer's
// self_attn.q_norm.weight / k_norm.weight [Dh] (Qwen 3's names), for the layouts built on it.
std::vector<HfLink> llama_hf_links(const config::ModelConfig& m);
// An Error for model.qk_norm (LlamaForCausalLM has no q/k norms).
HfLayout llama_hf_layout(const config::ModelConfig& m);
HfLayout gpt2_hf_layout(const config::ModelConfig& m);
// The one of the two the config's architecture fits; an Error naming its keys otherwise.
HfLayout dense_decoder_hf_layout(const config::ModelConfig& m);

}  // namespace mixprec::models
