// Small Llama, GPT-2, Qwen 3 and DeepSeek-V3 configs, weights away from their init, and logits:
// shared by the Hugging Face round-trip tests (unit/io) and the PyTorch agreement tests
// (reference/).
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mixprec/amp/policy.h"
#include "mixprec/autograd/grad_mode.h"
#include "mixprec/config/train_config.h"
#include "mixprec/io/checkpoint_state.h"
#include "mixprec/models/registry.h"
#include "mixprec/tensor/generator.h"

namespace mixprec::testing {

// Llama 3 with everything the layout maps: grouped-query attention (4 heads, 2 kv), RoPE
// theta 500000, torchtitan's sizing (multiple_of 32, multiplier 1.5: d_ff 256), untied.
inline config::ModelConfig hf_llama_config() {
  config::ModelConfig c;
  c.kind = "llama3";
  c.vocab_size = 61;
  c.d_model = 64;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.multiple_of = 32;
  c.ffn_dim_multiplier = 1.5;
  c.d_ff = 256;  // round_up(int(1.5 * 170), 32)
  c.max_seq_len = 32;
  c.rope_theta = 500000.0;
  c.tie_embeddings = false;
  return c;
}

// hf_llama_config with Llama 3.1's RoPE scaling (factor 8, low 1, high 4) over an original
// context of `original` positions.
inline config::ModelConfig hf_llama31_config(int64_t original) {
  config::ModelConfig c = hf_llama_config();
  c.rope_scaling.type = "llama3";
  c.rope_scaling.factor = 8.0;
  c.rope_scaling.low_freq_factor = 1.0;
  c.rope_scaling.high_freq_factor = 4.0;
  c.rope_scaling.original_max_position_embeddings = original;
  return c;
}

// GPT-2: LayerNorm, exact GELU, learned positions, biases, tied output.
inline config::ModelConfig hf_gpt2_config() {
  config::ModelConfig c;
  c.kind = "gpt";
  c.vocab_size = 50;
  c.d_model = 48;
  c.n_layers = 2;
  c.n_heads = 4;
  c.d_ff = 192;
  c.max_seq_len = 32;
  c.norm = "layernorm";
  c.mlp = "gelu";
  c.positions = "learned";
  c.bias = true;
  c.tie_embeddings = true;
  return c;
}

// Qwen 3 with what its layout adds to Llama's: heads of head_dim 24 beside d_model 64 and 4
// heads (q is 96 wide), 2 kv heads, per-head q/k norms; theta 1e6, eps 1e-6, untied.
inline config::ModelConfig hf_qwen3_config() {
  config::ModelConfig c;
  c.kind = "qwen3";
  c.vocab_size = 61;
  c.d_model = 64;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.head_dim = 24;
  c.d_ff = 96;
  c.max_seq_len = 32;
  c.norm_eps = 1e-6;
  c.rope_theta = 1e6;
  c.tie_embeddings = false;
  c.qk_norm = true;
  return c;
}

// DeepSeek-V3 with everything its layout maps: latent attention (4 heads, kv rank 32, nope 16 +
// rope 8, v 12: narrower than q and k; one wq, or q_lora_rank low-rank queries), YaRN x4 from
// 16 positions (so the 24 test positions see scaled frequencies) with mscale 1, a dense first
// block and two MoE blocks: 8 sigmoid-scored experts in 4 groups of which 2 are kept, top-3,
// renormalised and scaled 2.5, one shared expert, expert biases; eps 1e-6 (Hugging Face's
// latent norms have no other), untied.
inline config::ModelConfig hf_deepseek_v3_config(int64_t q_lora_rank = 0) {
  config::ModelConfig c;
  c.kind = "deepseek_v3";
  c.vocab_size = 61;
  c.d_model = 64;
  c.n_layers = 3;
  c.n_heads = 4;
  c.d_ff = 32;
  c.max_seq_len = 64;
  c.norm_eps = 1e-6;
  c.rope_theta = 10000.0;
  c.tie_embeddings = false;
  c.mla = {.q_lora_rank = q_lora_rank,
           .kv_lora_rank = 32,
           .qk_nope_head_dim = 16,
           .qk_rope_head_dim = 8,
           .v_head_dim = 12};
  c.rope_scaling.type = "yarn";
  c.rope_scaling.factor = 4.0;
  c.rope_scaling.original_max_position_embeddings = 16;
  c.rope_scaling.beta_fast = 32.0;
  c.rope_scaling.beta_slow = 1.0;
  c.rope_scaling.mscale = 1.0;
  c.rope_scaling.mscale_all_dim = 1.0;
  c.moe = {.n_experts = 8,
           .top_k = 3,
           .capacity_factor = 0.0,
           .aux_loss_weight = 0.0,
           .z_loss_weight = 0.0,
           .score_func = "sigmoid",
           .route_norm = true,
           .route_scale = 2.5,
           .n_expert_groups = 4,
           .n_limited_groups = 2,
           .n_shared_experts = 1,
           .n_dense_layers = 1,
           .dense_d_ff = 128,
           .load_balance_coeff = 1e-3};
  return c;
}

// The model in f32, every parameter drawn away from its init (norm gains near 1, biases and
// weights N(0, 0.05)), so a mapping that mixes up any two tensors changes the logits.
inline std::unique_ptr<models::Model> hf_test_model(const config::ModelConfig& c, uint64_t seed) {
  std::unique_ptr<models::Model> m = models::make_model(c);
  m->materialize(seed, amp::preset("fp32"));
  TensorMap values;
  Generator gen(seed + 1);
  for (const auto& [name, p] : m->parameters().entries()) {
    const bool gain = name.find("norm.weight") != std::string::npos;
    Tensor v = Tensor::normal(p->master().shape(), gain ? 1.0 : 0.0, gain ? 0.1 : 0.05, gen);
    values.emplace(io::kModelPrefix + name, v);
  }
  io::restore_training_state(values, {m->parameters().parameters()});
  // Expert biases (DeepSeek-V3's e_score_correction_bias) away from zero, and >= 0: Hugging
  // Face masks the groups a token may not use with 0.0 where torchtitan uses -inf, which
  // agree while every score plus bias is positive.
  for (const auto& [name, b] : m->buffers()) {
    std::vector<double> v = Tensor::normal(b.shape(), 0.0, 0.5, gen).to_doubles();
    for (double& x : v) x = std::fabs(x);
    Tensor(b).copy_from(Tensor::from_doubles(v, b.shape(), DType::f64));
  }
  return m;
}

// [B, T] i64 tokens, spread over the vocabulary.
inline Tensor hf_test_tokens(int64_t B, int64_t T, int64_t vocab) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < B * T; ++i) v.push_back((i * 37 + 11) % vocab);
  return Tensor::from_vector(v, {B, T});
}

inline Tensor logits_of(models::Model& m, const Tensor& tokens) {
  NoGradGuard no_grad;
  return m.forward(tokens);
}

}  // namespace mixprec::testing
