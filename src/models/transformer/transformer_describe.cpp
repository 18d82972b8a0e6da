// Transformer construction: config checks and the parameter description (meta phase).
#include <cmath>
#include <string>

#include "mixprec/models/transformer/transformer.h"

#include <fmt/format.h>

#include "mixprec/models/transformer/ffn_sizing.h"

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
  MIXPREC_CHECK(c.kind == "gpt" || c.kind == "moe" || c.kind == "llama3", kWhere,
                "model.kind = '" + c.kind + "' is not one of gpt, moe, llama3");
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
  MIXPREC_CHECK(c.n_kv_heads >= 0 && (c.n_kv_heads == 0 || c.n_heads % c.n_kv_heads == 0), kWhere,
                "model.n_kv_heads = " + std::to_string(c.n_kv_heads) +
                    " must divide model.n_heads = " + std::to_string(c.n_heads) + " (0 = n_heads)");
  MIXPREC_CHECK(c.norm_eps > 0 && std::isfinite(c.norm_eps), kWhere,
                "model.norm_eps = " + std::to_string(c.norm_eps) + " must be finite and > 0");
  MIXPREC_CHECK(c.rope_theta > 0 && std::isfinite(c.rope_theta), kWhere,
                "model.rope_theta = " + std::to_string(c.rope_theta) + " must be finite and > 0");
  if (c.multiple_of > 0) {
    const int64_t derived = llama_ffn_hidden_dim(c.d_model, c.multiple_of, c.ffn_dim_multiplier);
    MIXPREC_CHECK(c.d_ff == derived, kWhere,
                  "model.d_ff = " + std::to_string(c.d_ff) + " is not the " +
                      std::to_string(derived) + " that model.multiple_of gives");
  }
  if (c.kind == "llama3")
    MIXPREC_CHECK(c.norm == "rmsnorm" && c.mlp == "swiglu" && c.positions == "rope" && !c.bias,
                  kWhere,
                  "model.kind = llama3 needs norm rmsnorm, mlp swiglu, positions rope and no bias");
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
    MIXPREC_CHECK(c.moe.n_shared_experts >= 0 && c.moe.n_dense_layers >= 0 &&
                      c.moe.n_dense_layers <= c.n_layers &&
                      (c.moe.n_dense_layers == 0 || c.moe.dense_d_ff > 0),
                  kWhere,
                  "model.moe.n_shared_experts, n_dense_layers (<= model.n_layers) and dense_d_ff "
                  "(> 0 with dense layers) are out of range");
    check_one_of("moe.balance_scope", c.moe.balance_scope, "global", "rank");
  }
}

}  // namespace

Transformer::Transformer(const config::ModelConfig& config) : Model(config) {
  check_config(config_);
  mlp_ = parse_mlp_kind(config_.mlp);
  layernorm_ = config_.norm == "layernorm";
  rope_ = config_.positions == "rope";
  moe_ = config_.kind == "moe";
  kv_heads_ = config_.kv_heads();
  const config::MoeConfig& m = config_.moe;
  moe_options_ = {.top_k = m.top_k,
                  .capacity_factor = m.capacity_factor,
                  .mlp = mlp_,
                  .score_func = parse_score_func(m.score_func),
                  .route_norm = m.route_norm,
                  .route_scale = m.route_scale,
                  .n_groups = m.n_expert_groups,
                  .n_limited_groups = m.n_limited_groups,
                  .global_counts = nullptr};
  describe_parameters();
  if (moe_ && m.load_balance_coeff > 0)
    for (int64_t l = m.n_dense_layers; l < config_.n_layers; ++l) {
      expert_bias_.push_back(Tensor::zeros({m.n_experts}, DType::f32));
      buffers_.emplace_back(block_unit(l) + ".moe.expert_bias", expert_bias_.back());
    }
}

void Transformer::describe_parameters() {
  const config::ModelConfig& c = config_;
  const int64_t d = c.d_model, kv = kv_heads_ * (d / c.n_heads);
  const bool llama = c.kind == "llama3";
  const InitRule weight{InitKind::normal, 0.02};
  // The residual outputs (wo, w_down; Llama also w_up): GPT-2 scales by the depth of the
  // whole model, torchtitan's Llama (depth_init) by the layer's own: 0.02 / sqrt(2·(l + 1)).
  auto residual = [&](int64_t layer) {
    const double depth = static_cast<double>(llama ? layer + 1 : c.n_layers);
    return InitRule{InitKind::normal, 0.02 / std::sqrt(2.0 * depth)};
  };
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
  auto add_ffn = [&](const std::string& prefix, int64_t layer, int64_t ff) {
    if (mlp_ == MlpKind::swiglu) add_linear(prefix + ".w_gate", ff, d, weight);
    add_linear(prefix + ".w_up", ff, d, llama ? residual(layer) : weight);
    add_linear(prefix + ".w_down", d, ff, residual(layer));
  };

  // torchtitan's Llama: embedding N(0, 1); output N(0, d^-1/2) truncated at 3 std. A tied
  // Llama (as Llama 3.2 1B; torchtitan has none) takes Hugging Face's initializer_range,
  // N(0, 0.02): through the final RMSNorm a token's own logit is about d·std, 4096 with
  // N(0, 1).
  const InitRule out{InitKind::normal, 1.0 / std::sqrt(static_cast<double>(d)), 3.0};
  const InitRule embedding = c.tie_embeddings ? weight : InitRule{InitKind::normal, 1.0};
  add("tok_emb.weight", {c.vocab_size, d}, llama ? embedding : weight);
  if (!rope_) add("pos_emb.weight", {c.max_seq_len, d}, weight);
  for (int64_t l = 0; l < c.n_layers; ++l) {
    unit = block_unit(l);
    const std::string b = unit + ".";
    add_norm(b + "attn_norm");
    add_linear(b + "attn.wq", d, d, weight, {.heads = c.n_heads});
    add_linear(b + "attn.wk", kv, d, weight, {.heads = kv_heads_});
    add_linear(b + "attn.wv", kv, d, weight);
    add_linear(b + "attn.wo", d, d, residual(l));
    add_norm(b + "mlp_norm");
    if (moe_block(l)) {
      add(b + "moe.router", {c.moe.n_experts, d}, weight);
      for (int64_t e = 0; e < c.moe.n_experts; ++e)
        add_ffn(b + "moe.experts." + std::to_string(e), l, c.d_ff);
      if (c.moe.n_shared_experts > 0)
        add_ffn(b + "moe.shared_experts", l, c.moe.n_shared_experts * c.d_ff);
    } else {
      add_ffn(b + "mlp", l, moe_ ? c.moe.dense_d_ff : c.d_ff);
    }
  }
  unit = "root";
  add_norm("final_norm");
  if (!c.tie_embeddings) add("lm_head.weight", {c.vocab_size, d}, llama ? out : weight);
}

std::vector<std::string> Transformer::shard_units() const {
  std::vector<std::string> units{"root"};
  for (int64_t l = 0; l < config_.n_layers; ++l) units.push_back(block_unit(l));
  return units;
}

std::string Transformer::describe() const {
  const config::ModelConfig& c = config_;
  const std::string heads = kv_heads_ == c.n_heads
                                ? fmt::format("{} heads", c.n_heads)
                                : fmt::format("{} heads ({} kv)", c.n_heads, kv_heads_);
  const std::string positions =
      rope_ ? fmt::format("rope positions (theta {:g})", c.rope_theta) : "learned positions";
  std::string text = fmt::format(
      "model: {} | d_model {} | {} layers | {} | d_ff {} | {} | {} | {} | vocab {}", c.kind,
      c.d_model, c.n_layers, heads, c.d_ff, c.norm, c.mlp, positions, c.vocab_size);
  if (!moe_) return text;
  const config::MoeConfig& m = c.moe;
  text += fmt::format(" | {} experts, top-{}", m.n_experts, m.top_k);
  if (m.n_shared_experts > 0) text += fmt::format(" + {} shared", m.n_shared_experts);
  if (m.score_func != "softmax" || m.route_scale != 1.0 || !m.route_norm)
    text += fmt::format(", {} scores{}{}", m.score_func, m.route_norm ? "" : " unnormalised",
                        m.route_scale != 1.0 ? fmt::format(" x {:g}", m.route_scale) : "");
  if (m.n_expert_groups > 0)
    text += fmt::format(", {} of {} groups", m.n_limited_groups, m.n_expert_groups);
  if (m.n_dense_layers > 0)
    text += fmt::format(" | first {} dense (d_ff {})", m.n_dense_layers, m.dense_d_ff);
  if (m.load_balance_coeff > 0)
    text += fmt::format(" | expert bias balancing {:g}", m.load_balance_coeff);
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
