// Transformer construction: the parameter description (meta phase), units and describe().
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "mixprec/models/transformer/transformer.h"

#include <fmt/format.h>

#include "mixprec/models/transformer/rope_config.h"

namespace mixprec::models {

Transformer::Transformer(const config::ModelConfig& config, const DecoderArch& arch)
    : Model(config), arch_(arch) {
  mlp_ = parse_mlp_kind(config_.mlp);
  layernorm_ = config_.norm == "layernorm";
  rope_ = config_.positions == "rope";
  stacked_experts_ = arch_.experts && config.moe.idle_experts == "step";
  kv_heads_ = config_.kv_heads();
  head_dim_ = config_.head_size();
  // Latent attention rotates only each head's rope part.
  const int64_t rotated = arch_.latent_attention ? config_.mla.qk_rope_head_dim : head_dim_;
  if (rope_)
    rope_frequencies_ = rope_frequencies(rotated, config_.rope_theta, rope_scaling_of(config_));
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
  if (arch_.experts && m.load_balance_coeff > 0)
    for (int64_t l = m.n_dense_layers; l < config_.n_layers; ++l) {
      expert_bias_.push_back(Tensor::zeros({m.n_experts}, DType::f32));
      buffers_.emplace_back(block_unit(l) + ".moe.expert_bias", expert_bias_.back());
    }
}

void Transformer::describe_parameters() {
  const config::ModelConfig& c = config_;
  const int64_t d = c.d_model, q = c.n_heads * head_dim_, kv = kv_heads_ * head_dim_;
  const bool llama = arch_.init == DecoderInit::titan_llama;
  const InitRule weight{InitKind::normal, 0.02};
  // The residual outputs (wo, w_down; Llama also w_up): GPT-2 scales by the depth of the
  // whole model, torchtitan's Llama (depth_init) by the layer's own: 0.02 / sqrt(2·(l + 1));
  // plain (torchtitan's Qwen 3) not at all.
  auto residual = [&](int64_t layer) {
    if (arch_.init == DecoderInit::plain) return weight;
    const double depth = static_cast<double>(llama ? layer + 1 : c.n_layers);
    return InitRule{InitKind::normal, 0.02 / std::sqrt(2.0 * depth)};
  };
  const optim::ParamRole no_decay{.no_weight_decay = true};
  std::string unit = "root";  // the unit the parameters added next belong to
  auto add = [&](std::string name, Shape shape, InitRule init, optim::ParamRole role = {},
                 std::string linear_module = {}) {
    params_.add(
        {std::move(name), std::move(shape), role, init, unit, {}, std::move(linear_module)});
  };
  auto add_norm = [&](const std::string& prefix) {
    add(prefix + ".weight", {d}, {InitKind::ones}, no_decay);
    if (layernorm_) add(prefix + ".bias", {d}, {InitKind::zeros}, no_decay);
  };
  // A linear's weight [out, in], and its bias [out] when the config asks for biases.
  auto add_linear = [&](const std::string& name, int64_t out, int64_t in, InitRule init,
                        optim::ParamRole role = {}) {
    add(name, {out, in}, init, role, name);
    if (c.bias) add(name + "_bias", {out}, {InitKind::zeros}, no_decay);
  };
  auto add_ffn = [&](const std::string& prefix, int64_t layer, int64_t ff) {
    if (mlp_ == MlpKind::swiglu) add_linear(prefix + ".w_gate", ff, d, weight);
    add_linear(prefix + ".w_up", ff, d, llama ? residual(layer) : weight);
    add_linear(prefix + ".w_down", d, ff, residual(layer));
  };
  // The routed experts stacked (idle_experts = "step"): "<experts>.w_up" [E, out, in] and its
  // bias [E, out]. Expert e's slice is drawn as its own parameter "<experts>.<e>.w_up" of the
  // per-expert layout would be (init_slices), so both layouts start from the same weights.
  const int64_t E = c.moe.n_experts;
  auto add_stacked_linear = [&](const std::string& experts, const std::string& leaf, int64_t out,
                                int64_t in, InitRule init) {
    std::vector<std::string> slices;
    for (int64_t e = 0; e < E; ++e) slices.push_back(experts + "." + std::to_string(e) + leaf);
    params_.add({experts + leaf, {E, out, in}, {}, init, unit, std::move(slices)});
    if (c.bias) add(experts + leaf + "_bias", {E, out}, {InitKind::zeros}, no_decay);
  };
  auto add_experts = [&](const std::string& experts, int64_t layer) {
    if (!stacked_experts_) {
      for (int64_t e = 0; e < E; ++e) add_ffn(experts + "." + std::to_string(e), layer, c.d_ff);
      return;
    }
    if (mlp_ == MlpKind::swiglu) add_stacked_linear(experts, ".w_gate", c.d_ff, d, weight);
    add_stacked_linear(experts, ".w_up", c.d_ff, d, llama ? residual(layer) : weight);
    add_stacked_linear(experts, ".w_down", d, c.d_ff, residual(layer));
  };

  // torchtitan's deepseek_v3 Attention, in its order: the projections N(0, 0.02), the output
  // depth-scaled as any residual output; the latent norms' gains 1.
  auto add_latent_attention = [&](const std::string& attn, int64_t layer) {
    const config::MlaConfig& a = c.mla;
    const int64_t H = c.n_heads, qk = H * (a.qk_nope_head_dim + a.qk_rope_head_dim);
    if (a.q_lora_rank == 0) {
      add_linear(attn + "wq", qk, d, weight, {.heads = H});
    } else {
      add_linear(attn + "wq_a", a.q_lora_rank, d, weight);
      add(attn + "q_norm.weight", {a.q_lora_rank}, {InitKind::ones}, no_decay);
      add_linear(attn + "wq_b", qk, a.q_lora_rank, weight, {.heads = H});
    }
    add_linear(attn + "wkv_a", a.kv_lora_rank + a.qk_rope_head_dim, d, weight);
    add(attn + "kv_norm.weight", {a.kv_lora_rank}, {InitKind::ones}, no_decay);
    add_linear(attn + "wkv_b", H * (a.qk_nope_head_dim + a.v_head_dim), a.kv_lora_rank, weight,
               {.heads = H});
    add_linear(attn + "wo", d, H * a.v_head_dim, residual(layer));
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
    if (arch_.latent_attention) {
      add_latent_attention(b + "attn.", l);
    } else {
      add_linear(b + "attn.wq", q, d, weight, {.heads = c.n_heads});
      add_linear(b + "attn.wk", kv, d, weight, {.heads = kv_heads_});
      add_linear(b + "attn.wv", kv, d, weight);
      add_linear(b + "attn.wo", d, q, residual(l));
    }
    if (c.qk_norm) {  // RMSNorm gains: no bias, whatever model.norm is
      add(b + "attn.q_norm.weight", {head_dim_}, {InitKind::ones}, no_decay);
      add(b + "attn.k_norm.weight", {head_dim_}, {InitKind::ones}, no_decay);
    }
    add_norm(b + "mlp_norm");
    if (moe_block(l)) {
      // torchtitan depth-scales the router's gate too (its deepseek_v3 and MoE Llama).
      add(b + "moe.router", {c.moe.n_experts, d}, llama ? residual(l) : weight);
      add_experts(b + "moe.experts", l);
      if (c.moe.n_shared_experts > 0)
        add_ffn(b + "moe.shared_experts", l, c.moe.n_shared_experts * c.d_ff);
    } else {
      add_ffn(b + "mlp", l, arch_.experts ? c.moe.dense_d_ff : c.d_ff);
    }
  }
  unit = "root";
  add_norm("final_norm");
  if (!c.tie_embeddings)
    add("lm_head.weight", {c.vocab_size, d}, llama ? out : weight, {}, "lm_head");
}

std::vector<std::string> Transformer::shard_units() const {
  std::vector<std::string> units{"root"};
  for (int64_t l = 0; l < config_.n_layers; ++l) units.push_back(block_unit(l));
  return units;
}

std::string Transformer::describe() const {
  const config::ModelConfig& c = config_;
  std::string heads = kv_heads_ == c.n_heads
                          ? fmt::format("{} heads", c.n_heads)
                          : fmt::format("{} heads ({} kv)", c.n_heads, kv_heads_);
  if (c.head_dim > 0) heads += fmt::format(" of {}", head_dim_);
  if (arch_.latent_attention) {
    const config::MlaConfig& a = c.mla;
    heads += fmt::format(", latent attention (q rank {}, kv rank {}, nope {} + rope {}, v {})",
                         a.q_lora_rank, a.kv_lora_rank, a.qk_nope_head_dim, a.qk_rope_head_dim,
                         a.v_head_dim);
  }
  if (c.qk_norm) heads += ", qk-norm";
  const std::string positions =
      !rope_ ? std::string("learned positions")
      : c.rope_scaling.type == "none"
          ? fmt::format("rope positions (theta {:g})", c.rope_theta)
          : fmt::format("rope positions (theta {:g}, {} x{:g} from {})", c.rope_theta,
                        c.rope_scaling.type, c.rope_scaling.factor,
                        rope_scaling_of(c).original_max_position_embeddings);
  std::string text = fmt::format(
      "model: {} | d_model {} | {} layers | {} | d_ff {} | {} | {} | {} | vocab {}", c.kind,
      c.d_model, c.n_layers, heads, c.d_ff, c.norm, c.mlp, positions, c.vocab_size);
  if (!arch_.experts) return text;
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
  if (!stacked_experts_) text += " | per-expert weights (idle experts skip the step)";
  return text;
}

// A token reads top_k of the n_experts experts of every MoE block (".moe.experts." names an
// expert's own parameter and, stacked, every expert's slices of one).
std::optional<int64_t> Transformer::active_parameter_count() const {
  if (!arch_.experts) return std::nullopt;
  const int64_t E = config_.moe.n_experts, slices = stacked_experts_ ? E : 1;
  int64_t total = 0;
  for (const ParamSpec& s : params_.specs()) {
    const bool expert = s.name.find(".moe.experts.") != std::string::npos;
    // Per expert (its slice when stacked), rounded down as each expert's own parameter is.
    total += expert ? slices * (s.numel() / slices * config_.moe.top_k / E) : s.numel();
  }
  return total;
}

}  // namespace mixprec::models
