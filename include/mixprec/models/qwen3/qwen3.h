// The qwen3 family (model.kind = "qwen3"): torchtitan's dense Qwen 3 (torchtitan/models/qwen3),
// Hugging Face's Qwen3ForCausalLM: RMSNorm, RoPE (base model.rope_theta), SwiGLU of width
// model.d_ff, grouped-query attention with heads of model.head_dim (which may differ from
// d_model / n_heads) and an RMSNorm over each head of q and of k before RoPE (model.qk_norm,
// required), no biases, tied or untied output; every linear and the embedding N(0, 0.02).
// Hugging Face: model_type "qwen3", Llama's tensor names plus self_attn.q_norm/k_norm.
#pragma once

#include "mixprec/models/registry.h"

namespace mixprec::models::qwen3 {

extern const ModelSpec kSpec;

}  // namespace mixprec::models::qwen3
