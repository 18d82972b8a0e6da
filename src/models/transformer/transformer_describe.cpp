// Transformer construction: config checks and the parameter description (meta phase).
#include <cmath>
#include <string>

#include "mixprec/models/transformer/transformer.h"

#include <fmt/format.h>

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

Transformer::Transformer(const config::ModelConfig& config) : Model(config) {
  check_config(config_);
  mlp_ = parse_mlp_kind(config_.mlp);
  layernorm_ = config_.norm == "layernorm";
  rope_ = config_.positions == "rope";
  moe_ = config_.kind == "moe";
  describe_parameters();
}

void Transformer::describe_parameters() {
  const config::ModelConfig& c = config_;
  const int64_t d = c.d_model, ff = c.d_ff;
  const InitRule weight{InitKind::normal, 0.02};
  const InitRule residual{InitKind::normal,
                          0.02 / std::sqrt(2.0 * static_cast<double>(c.n_layers))};
  const optim::ParamRole no_decay{.no_weight_decay = true};
  std::string unit = "root";  // the unit the parameters added next belong to
  auto add = [&](std::string name, Shape shape, InitRule init, optim::ParamRole role = {}) {
    params_.add({std::move(name), std::move(shape), role, init, unit});
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
    unit = block_unit(l);
    const std::string b = unit + ".";
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
  unit = "root";
  add_norm("final_norm");
  if (!c.tie_embeddings) add("lm_head.weight", {c.vocab_size, d}, weight);
}

std::vector<std::string> Transformer::shard_units() const {
  std::vector<std::string> units{"root"};
  for (int64_t l = 0; l < config_.n_layers; ++l) units.push_back(block_unit(l));
  return units;
}

std::string Transformer::describe() const {
  const config::ModelConfig& c = config_;
  std::string text = fmt::format(
      "model: {} | d_model {} | {} layers | {} heads | d_ff {} | {} | {} | {} positions | "
      "vocab {}",
      c.kind, c.d_model, c.n_layers, c.n_heads, c.d_ff, c.norm, c.mlp, c.positions, c.vocab_size);
  if (moe_) text += fmt::format(" | {} experts, top-{}", c.moe.n_experts, c.moe.top_k);
  return text;
}

// A token reads top_k of the n_experts experts of every MoE block.
std::optional<int64_t> Transformer::active_parameter_count() const {
  if (!moe_) return std::nullopt;
  int64_t total = 0;
  for (const ParamSpec& s : params_.specs()) {
    const bool expert = s.name.find(".moe.experts.") != std::string::npos;
    total += expert ? s.numel() * config_.moe.top_k / config_.moe.n_experts : s.numel();
  }
  return total;
}

}  // namespace mixprec::models
