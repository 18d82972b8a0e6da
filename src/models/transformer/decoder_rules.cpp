// The shared decoder's config rules (decoder_rules.h).
#include "mixprec/models/transformer/decoder_rules.h"

#include <cmath>

#include "mixprec/models/transformer/ffn_sizing.h"
#include "mixprec/models/transformer/rope_config.h"

namespace mixprec::models {

void check_bound(const config::ConfigRules& c, const std::string& key, int64_t value,
                 int64_t bound) {
  c.require(value <= bound, key, "must be <= " + std::to_string(bound));
}

namespace {

// The heads' width: model.head_dim, or d_model / n_heads when it is 0 (n_heads > 0 checked).
void check_heads(const config::ModelConfig& m, const config::ConfigRules& c) {
  c.require(m.head_dim >= 0, "model.head_dim", "must be >= 0 (0 = model.d_model / model.n_heads)");
  check_bound(c, "model.head_dim", m.head_dim, kMaxModelWidth);
  if (m.head_dim == 0) {
    c.require(m.d_model % m.n_heads == 0, "model.n_heads",
              "must divide " + c.show("model.d_model") + " (or set model.head_dim)");
  } else {
    // Bounds like d_model's and d_ff's: the attention's width and wq's weights.
    const double width = static_cast<double>(m.n_heads) * static_cast<double>(m.head_dim);
    c.require(width <= static_cast<double>(kMaxModelWidth), "model.head_dim",
              "times model.n_heads must be <= " + std::to_string(kMaxModelWidth) +
                  " (the queries' width)");
    c.require(width * static_cast<double>(m.d_model) <= kMaxLayerWeights, "model.head_dim",
              "times model.n_heads and model.d_model must be <= 2^40 (the weights of wq)");
  }
  if (m.positions != "rope") return;
  // RoPE rotates pairs of dimensions within each head.
  if (m.head_dim > 0)
    c.require(m.head_dim % 2 == 0, "model.head_dim", "must be even with positions = \"rope\"");
  else if (m.d_model % m.n_heads == 0)
    c.require((m.d_model / m.n_heads) % 2 == 0, "model.n_heads",
              "gives an odd head size d_model / n_heads with positions = \"rope\" (" +
                  c.show("model.d_model") + "; or set an even model.head_dim)");
}

}  // namespace

void check_decoder_config(const config::ModelConfig& m, const config::ConfigRules& c,
                          double mlp_copies, const std::string& copies_keys) {
  // The config loader checks choices first (the key table's); a config built in code is
  // told its value here.
  c.require(m.norm == "rmsnorm" || m.norm == "layernorm", "model.norm",
            "= \"" + m.norm + "\" is not one of: rmsnorm, layernorm");
  c.require(m.mlp == "swiglu" || m.mlp == "gelu" || m.mlp == "gelu_tanh", "model.mlp",
            "= \"" + m.mlp + "\" is not one of: swiglu, gelu, gelu_tanh");
  c.require(m.positions == "rope" || m.positions == "learned", "model.positions",
            "= \"" + m.positions + "\" is not one of: rope, learned");
  c.require(m.vocab_size > 0, "model.vocab_size", "must be > 0");
  c.require(m.d_model > 0, "model.d_model", "must be > 0");
  c.require(m.n_layers > 0, "model.n_layers", "must be > 0");
  check_bound(c, "model.vocab_size", m.vocab_size, kMaxModelWidth);
  check_bound(c, "model.d_model", m.d_model, kMaxModelWidth);
  check_bound(c, "model.d_ff", m.d_ff, kMaxModelWidth);
  check_bound(c, "model.max_seq_len", m.max_seq_len, kMaxModelWidth);
  // Products too: the memory planner counts a layer's weights and an attention's scores in
  // int64 bytes.
  c.require(
      mlp_copies * static_cast<double>(m.d_model) * static_cast<double>(m.d_ff) <= kMaxLayerWeights,
      "model.d_ff",
      "times model.d_model" + copies_keys + " must be <= 2^40 (the weights of one layer)");
  c.require(static_cast<double>(m.vocab_size) * static_cast<double>(m.d_model) <= kMaxLayerWeights,
            "model.vocab_size", "times model.d_model must be <= 2^40 (the embedding's weights)");
  c.require(m.n_heads > 0, "model.n_heads", "must be > 0");
  check_heads(m, c);
  c.require(m.n_kv_heads >= 0, "model.n_kv_heads", "must be >= 0 (0 = model.n_heads)");
  c.require(m.n_kv_heads == 0 || m.n_heads % m.n_kv_heads == 0, "model.n_kv_heads",
            "must divide " + c.show("model.n_heads") + " (grouped-query attention)");
  c.require(m.d_ff > 0, "model.d_ff", "must be > 0");
  c.require(m.multiple_of >= 0, "model.multiple_of", "must be >= 0 (0 = d_ff as given)");
  check_bound(c, "model.multiple_of", m.multiple_of, kMaxModelWidth);
  c.require(m.ffn_dim_multiplier >= 0 && m.ffn_dim_multiplier <= kMaxFfnMultiplier,
            "model.ffn_dim_multiplier", "must be in [0, 1000] (0 = none)");
  if (m.multiple_of > 0) {
    // The loader derives d_ff so (resolve_model_sizes); a config built in code must agree.
    const int64_t derived = llama_ffn_hidden_dim(m.d_model, m.multiple_of, m.ffn_dim_multiplier);
    c.require(m.d_ff == derived, "model.d_ff",
              "is not the " + std::to_string(derived) + " that " + c.show("model.multiple_of") +
                  " gives");
  }
  c.require(m.norm_eps > 0 && std::isfinite(m.norm_eps), "model.norm_eps",
            "must be finite and > 0");
  c.require(m.rope_theta > 0 && std::isfinite(m.rope_theta), "model.rope_theta",
            "must be finite and > 0");
  c.require(m.max_seq_len > 0, "model.max_seq_len", "must be > 0");
  c.require(m.rope_scaling.type == "none" || m.positions == "rope", "model.rope_scaling.type",
            "needs model.positions = \"rope\"");
  if (const auto p = rope_scaling_problem(rope_scaling_of(m)))
    c.require(false, std::string("model.rope_scaling.") + p->key, p->rule);
}

std::string no_size_keys(const config::ModelConfig&) {
  return "";
}

int64_t one_block_kind(const config::ModelConfig&) {
  return 1;
}

config::ModelConfig with_layers(const config::ModelConfig& m, int64_t layers, int64_t) {
  config::ModelConfig out = m;
  out.n_layers = layers;
  return out;
}

}  // namespace mixprec::models
