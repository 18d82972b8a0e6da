// Transformer construction: config checks and the parameter description (meta phase).
#include <cmath>
#include <string>

#include "mixprec/models/transformer.h"

namespace mixprec::models {
namespace {

constexpr const char* kWhere = "Transformer";

void check_one_of(const std::string& key, const std::string& value, const char* a, const char* b) {
  MIXPREC_CHECK(value == a || value == b, kWhere,
                "model." + key + " = '" + value + "' is not one of " + a + ", " + b);
}

void check_positive(const char* key, int64_t v) {
  MIXPREC_CHECK(v > 0, kWhere,
                std::string("model.") + key + " = " + std::to_string(v) + " must be > 0");
}

void check_config(const config::ModelConfig& c) {
  check_one_of("kind", c.kind, "gpt", "moe");
  check_one_of("norm", c.norm, "rmsnorm", "layernorm");
  check_one_of("mlp", c.mlp, "swiglu", "gelu");
  check_one_of("positions", c.positions, "rope", "learned");
  check_positive("vocab_size", c.vocab_size);
  check_positive("d_model", c.d_model);
  check_positive("n_layers", c.n_layers);
  check_positive("n_heads", c.n_heads);
  check_positive("d_ff", c.d_ff);
  check_positive("max_seq_len", c.max_seq_len);
  MIXPREC_CHECK(c.d_model % c.n_heads == 0, kWhere,
                "model.d_model = " + std::to_string(c.d_model) +
                    " is not a multiple of model.n_heads = " + std::to_string(c.n_heads));
  if (c.positions == "rope")
    MIXPREC_CHECK((c.d_model / c.n_heads) % 2 == 0, kWhere,
                  "rope needs an even head dim, got " + std::to_string(c.d_model / c.n_heads));
  if (c.kind == "moe") {
    check_positive("moe.n_experts", c.moe.n_experts);
    MIXPREC_CHECK(c.moe.top_k >= 1 && c.moe.top_k <= c.moe.n_experts, kWhere,
                  "model.moe.top_k = " + std::to_string(c.moe.top_k) + " must be in [1, " +
                      std::to_string(c.moe.n_experts) + "]");
    MIXPREC_CHECK(
        c.moe.capacity_factor >= 0, kWhere,
        "model.moe.capacity_factor = " + std::to_string(c.moe.capacity_factor) + " must be >= 0");
  }
}

}  // namespace

Transformer::Transformer(const config::ModelConfig& config) : config_(config) {
  check_config(config_);
  mlp_ = parse_mlp_kind(config_.mlp);
  layernorm_ = config_.norm == "layernorm";
  rope_ = config_.positions == "rope";
  moe_ = config_.kind == "moe";
  describe();
}

void Transformer::describe() {
  const config::ModelConfig& c = config_;
  const int64_t d = c.d_model, ff = c.d_ff;
  const InitRule weight{InitKind::normal, 0.02};
  const InitRule residual{InitKind::normal,
                          0.02 / std::sqrt(2.0 * static_cast<double>(c.n_layers))};
  const optim::ParamRole no_decay{.no_weight_decay = true};
  auto add = [&](std::string name, Shape shape, InitRule init, optim::ParamRole role = {}) {
    params_.add({std::move(name), std::move(shape), role, init});
  };
  auto add_norm = [&](const std::string& prefix) {
    add(prefix + ".weight", {d}, {InitKind::ones}, no_decay);
    if (layernorm_) add(prefix + ".bias", {d}, {InitKind::zeros}, no_decay);
  };
  // A linear's weight [out, in], and its bias [out] when the config asks for biases.
  auto add_linear = [&](const std::string& name, int64_t out, int64_t in, InitRule init,
                        optim::ParamRole role = {}) {
    add(name, {out, in}, init, role);
    if (c.bias) add(name + "_bias", {out}, {InitKind::zeros}, no_decay);
  };
  auto add_ffn = [&](const std::string& prefix) {
    if (mlp_ == MlpKind::swiglu) add_linear(prefix + ".w_gate", ff, d, weight);
    add_linear(prefix + ".w_up", ff, d, weight);
    add_linear(prefix + ".w_down", d, ff, residual);
  };

  add("tok_emb.weight", {c.vocab_size, d}, weight);
  if (!rope_) add("pos_emb.weight", {c.max_seq_len, d}, weight);
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const std::string b = "blocks." + std::to_string(l) + ".";
    add_norm(b + "attn_norm");
    add_linear(b + "attn.wq", d, d, weight, {.heads = c.n_heads});
    add_linear(b + "attn.wk", d, d, weight, {.heads = c.n_heads});
    add_linear(b + "attn.wv", d, d, weight);
    add_linear(b + "attn.wo", d, d, residual);
    add_norm(b + "mlp_norm");
    if (moe_) {
      add(b + "moe.router", {c.moe.n_experts, d}, weight);
      for (int64_t e = 0; e < c.moe.n_experts; ++e) add_ffn(b + "moe.experts." + std::to_string(e));
    } else {
      add_ffn(b + "mlp");
    }
  }
  add_norm("final_norm");
  if (!c.tie_embeddings) add("lm_head.weight", {c.vocab_size, d}, weight);
}

}  // namespace mixprec::models
