// Small Llama, GPT-2 and Qwen 3 configs, weights away from their init, and logits: shared by the
// Hugging Face round-trip tests (unit/io) and the PyTorch agreement tests (reference/).
#pragma once

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
