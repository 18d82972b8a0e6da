// DeepseekV3ForCausalLM's layout (deepseek_v3_hf.h), from transformers' modeling and
// configuration files for deepseek_v3 and DeepSeek-V3's published config.json.
#include "deepseek_v3_hf.h"

#include <fmt/format.h>

#include <string>
#include <vector>

#include "mixprec/core/error.h"
#include "mixprec/models/transformer/rope_config.h"

namespace mixprec::models::deepseek_v3 {
namespace {

using nlohmann::json;

// DeepSeek's checkpoints keep each rope part as adjacent pairs (x0, x1), (x2, x3), ...;
// ours pairs feature i with i + rope/2 (rotate-half). File row `start + j` is our row
// `start + (j % 2)·rope/2 + j/2`, for each rope part starting at `starts`.
std::vector<int64_t> interleaved_rope_rows(int64_t rows, const std::vector<int64_t>& starts,
                                           int64_t rope) {
  std::vector<int64_t> order(static_cast<std::size_t>(rows));
  for (int64_t i = 0; i < rows; ++i) order[static_cast<std::size_t>(i)] = i;
  for (const int64_t start : starts)
    for (int64_t j = 0; j < rope; ++j)
      order[static_cast<std::size_t>(start + j)] = start + (j % 2) * (rope / 2) + j / 2;
  return order;
}

void add_attention(std::vector<HfLink>& links, const config::ModelConfig& m, const std::string& hf,
                   const std::string& b) {
  const config::MlaConfig& a = m.mla;
  const int64_t d = m.d_model, H = m.n_heads, pe = a.qk_rope_head_dim;
  const int64_t qk = a.qk_nope_head_dim + pe, r = a.kv_lora_rank;
  std::vector<int64_t> q_rope_starts;
  for (int64_t h = 0; h < H; ++h) q_rope_starts.push_back(h * qk + a.qk_nope_head_dim);
  const std::vector<int64_t> q_rows = interleaved_rope_rows(H * qk, q_rope_starts, pe);
  if (a.q_lora_rank == 0) {
    links.push_back({hf + "self_attn.q_proj.weight", {{b + "attn.wq", H * qk}}, d, false, q_rows});
  } else {
    const int64_t rq = a.q_lora_rank;
    links.push_back({hf + "self_attn.q_a_proj.weight", {{b + "attn.wq_a", rq}}, d});
    links.push_back({hf + "self_attn.q_a_layernorm.weight", {{b + "attn.q_norm.weight", rq}}});
    links.push_back(
        {hf + "self_attn.q_b_proj.weight", {{b + "attn.wq_b", H * qk}}, rq, false, q_rows});
  }
  links.push_back({hf + "self_attn.kv_a_proj_with_mqa.weight",
                   {{b + "attn.wkv_a", r + pe}},
                   d,
                   false,
                   interleaved_rope_rows(r + pe, {r}, pe)});
  links.push_back({hf + "self_attn.kv_a_layernorm.weight", {{b + "attn.kv_norm.weight", r}}});
  links.push_back({hf + "self_attn.kv_b_proj.weight",
                   {{b + "attn.wkv_b", H * (a.qk_nope_head_dim + a.v_head_dim)}},
                   r});
  links.push_back({hf + "self_attn.o_proj.weight", {{b + "attn.wo", d}}, H * a.v_head_dim});
}

// SwiGLU's three projections under `hf` ("mlp.", "mlp.shared_experts.") from ours (`w`:
// "mlp", "moe.shared_experts"); `expert` >= 0 takes that slice of stacked experts.
void add_swiglu(std::vector<HfLink>& links, const std::string& hf, const std::string& w, int64_t d,
                int64_t ff, int64_t expert = -1) {
  links.push_back({hf + "gate_proj.weight", {{w + ".w_gate", ff, expert}}, d});
  links.push_back({hf + "up_proj.weight", {{w + ".w_up", ff, expert}}, d});
  links.push_back({hf + "down_proj.weight", {{w + ".w_down", d, expert}}, ff});
}

void add_experts(std::vector<HfLink>& links, const config::ModelConfig& m, const std::string& hf,
                 const std::string& b) {
  const config::MoeConfig& moe = m.moe;
  const int64_t d = m.d_model, E = moe.n_experts;
  links.push_back({hf + "mlp.gate.weight", {{b + "moe.router", E}}, d});
  // DeepSeek's router keeps the expert bias beside its weight; without one (load_balance_coeff
  // 0) the file's must be zeros.
  HfPart bias{b + "moe.expert_bias", E, -1, true};
  if (moe.load_balance_coeff == 0)
    bias = {"", E, -1, false, "this model has no expert biases (model.moe.load_balance_coeff = 0)"};
  links.push_back({hf + "mlp.gate.e_score_correction_bias", {bias}});
  const bool stacked = moe.idle_experts == "step";
  for (int64_t e = 0; e < E; ++e) {
    const std::string file = hf + fmt::format("mlp.experts.{}.", e);
    if (stacked)
      add_swiglu(links, file, b + "moe.experts", d, m.d_ff, e);
    else
      add_swiglu(links, file, b + fmt::format("moe.experts.{}", e), d, m.d_ff);
  }
  if (moe.n_shared_experts > 0)
    add_swiglu(links, hf + "mlp.shared_experts.", b + "moe.shared_experts", d,
               moe.n_shared_experts * m.d_ff);
}

std::vector<HfLink> links_of(const config::ModelConfig& m) {
  const int64_t d = m.d_model, V = m.vocab_size;
  std::vector<HfLink> links{{"model.embed_tokens.weight", {{"tok_emb.weight", V}}, d}};
  for (int64_t l = 0; l < m.n_layers; ++l) {
    const std::string hf = fmt::format("model.layers.{}.", l), b = fmt::format("blocks.{}.", l);
    links.push_back({hf + "input_layernorm.weight", {{b + "attn_norm.weight", d}}});
    add_attention(links, m, hf, b);
    links.push_back({hf + "post_attention_layernorm.weight", {{b + "mlp_norm.weight", d}}});
    if (l < m.moe.n_dense_layers)
      add_swiglu(links, hf + "mlp.", b + "mlp", d, m.moe.dense_d_ff);
    else
      add_experts(links, m, hf, b);
  }
  links.push_back({"model.norm.weight", {{"final_norm.weight", d}}});
  if (!m.tie_embeddings) links.push_back({"lm_head.weight", {{"lm_head.weight", V}}, d});
  return links;
}

// A null q_lora_rank is one q_proj (our 0), not an absent key (DeepseekV3Config's 1536).
json q_lora_rank_of_file(const json& value, const json& file) {
  const auto it = file.find("q_lora_rank");
  return it != file.end() && it->is_null() ? json() : value;
}

// What DeepseekV3ForCausalLM cannot express.
void check_expressible(const config::ModelConfig& m) {
  const config::MoeConfig& moe = m.moe;
  if (moe.score_func != "sigmoid")
    throw Error("hf", "model.moe.score_func = \"" + moe.score_func +
                          "\" has no Hugging Face layout: DeepseekV3ForCausalLM routes by "
                          "sigmoid scores (torchtitan's debug and 16B flavours use softmax)");
  if (moe.capacity_factor > 0)
    throw Error("hf", fmt::format("model.moe.capacity_factor = {:g} has no Hugging Face layout: "
                                  "DeepseekV3ForCausalLM drops no tokens (set 0)",
                                  moe.capacity_factor));
}

}  // namespace

HfLayout hf_layout(const config::ModelConfig& m) {
  check_expressible(m);
  const config::MoeConfig& moe = m.moe;
  const config::MlaConfig& a = m.mla;
  const int64_t heads = m.n_heads;
  // No group limit is one group of every expert, of which a token may use one.
  const int64_t groups = moe.n_expert_groups > 0 ? moe.n_expert_groups : 1;
  const int64_t limited = moe.n_expert_groups > 0 ? moe.n_limited_groups : 1;
  const json q_lora = a.q_lora_rank > 0 ? json(a.q_lora_rank) : json();
  std::vector<HfKey> keys{
      {"vocab_size", m.vocab_size, "model.vocab_size", nullptr},
      {"hidden_size", m.d_model, "model.d_model", nullptr},
      // The dense blocks' width (unused, but written, without them).
      {"intermediate_size", moe.n_dense_layers > 0 ? moe.dense_d_ff : m.d_ff,
       "model.moe.dense_d_ff", 18432, moe.n_dense_layers > 0},
      {"moe_intermediate_size", m.d_ff, "model.d_ff", 2048},
      {"num_hidden_layers", m.n_layers, "model.n_layers", nullptr},
      {"num_attention_heads", heads, "model.n_heads", nullptr},
      {"num_key_value_heads", heads, "model.n_heads (latent attention)", heads},
      {"n_routed_experts", moe.n_experts, "model.moe.n_experts", 256},
      {"n_shared_experts", moe.n_shared_experts, "model.moe.n_shared_experts", 1},
      {"num_experts_per_tok", moe.top_k, "model.moe.top_k", 8},
      {"first_k_dense_replace", moe.n_dense_layers, "model.moe.n_dense_layers", 3},
      {"moe_layer_freq", 1, "(experts in every block from model.moe.n_dense_layers on)", 1},
      {"n_group", groups, "model.moe.n_expert_groups", 8},
      {"topk_group", limited, "model.moe.n_limited_groups", 4},
      {"norm_topk_prob", moe.route_norm, "model.moe.route_norm", true},
      {"routed_scaling_factor", moe.route_scale, "model.moe.route_scale", 2.5},
      {"scoring_func", "sigmoid", "model.moe.score_func", "sigmoid"},
      {"topk_method", "noaux_tc", "(top-k by score plus the expert bias)", "noaux_tc"},
      {"q_lora_rank", q_lora, "model.mla.q_lora_rank", 1536, true, q_lora_rank_of_file},
      {"kv_lora_rank", a.kv_lora_rank, "model.mla.kv_lora_rank", 512},
      {"qk_nope_head_dim", a.qk_nope_head_dim, "model.mla.qk_nope_head_dim", 128},
      {"qk_rope_head_dim", a.qk_rope_head_dim, "model.mla.qk_rope_head_dim", 64},
      {"v_head_dim", a.v_head_dim, "model.mla.v_head_dim", 128},
      {"rms_norm_eps", m.norm_eps, "model.norm_eps", 1e-6},
      {"rope_theta", m.rope_theta, "model.rope_theta", 10000.0},
      {"rope_scaling", hf_rope_scaling(m), "model.rope_scaling", nullptr, true,
       normalize_hf_rope_scaling},
      // Our rows are stored in DeepSeek's interleaved order (the layout's row_order).
      {"rope_interleave", true, "(DeepSeek's interleaved RoPE rows)", true},
      {"tie_word_embeddings", m.tie_embeddings, "model.tie_embeddings", false},
      {"hidden_act", "silu", "model.mlp = \"swiglu\"", "silu"},
      {"attention_bias", false, "model.bias", false},
      // Multi-token prediction layers follow the model's in a file (DeepSeek-V3 has one);
      // Hugging Face's model skips them, and so does this layout (HfLayout::extra_layers).
      {"num_nextn_predict_layers", 0, "(no multi-token prediction)", 0, false},
      {"max_position_embeddings", m.max_seq_len, "model.max_seq_len", nullptr, false},
  };
  HfLayout layout{"deepseek_v3",   "DeepseekV3ForCausalLM",     links_of(m),
                  std::move(keys), "model.embed_tokens.weight", ""};
  layout.extra_layers = "model.layers.";
  return layout;
}

}  // namespace mixprec::models::deepseek_v3
