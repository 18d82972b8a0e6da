// The shared decoder's Hugging Face layouts (hf_layouts.h): one table of tensors and one of
// config.json keys per layout.
#include "mixprec/models/transformer/hf_layouts.h"

#include <fmt/format.h>

#include "mixprec/core/error.h"
#include "mixprec/models/transformer/rope_config.h"

namespace mixprec::models {

std::vector<HfLink> llama_hf_links(const config::ModelConfig& m) {
  const int64_t d = m.d_model, hd = m.head_size(), q = m.n_heads * hd, kv = m.kv_heads() * hd;
  const int64_t ff = m.d_ff, V = m.vocab_size;
  std::vector<HfLink> links{{"model.embed_tokens.weight", {{"tok_emb.weight", V}}, d}};
  for (int64_t l = 0; l < m.n_layers; ++l) {
    const std::string hf = fmt::format("model.layers.{}.", l), b = fmt::format("blocks.{}.", l);
    links.push_back({hf + "input_layernorm.weight", {{b + "attn_norm.weight", d}}});
    links.push_back({hf + "self_attn.q_proj.weight", {{b + "attn.wq", q}}, d});
    links.push_back({hf + "self_attn.k_proj.weight", {{b + "attn.wk", kv}}, d});
    links.push_back({hf + "self_attn.v_proj.weight", {{b + "attn.wv", kv}}, d});
    links.push_back({hf + "self_attn.o_proj.weight", {{b + "attn.wo", d}}, q});
    if (m.qk_norm) {  // Qwen3Attention's order: after o_proj
      links.push_back({hf + "self_attn.q_norm.weight", {{b + "attn.q_norm.weight", hd}}});
      links.push_back({hf + "self_attn.k_norm.weight", {{b + "attn.k_norm.weight", hd}}});
    }
    links.push_back({hf + "post_attention_layernorm.weight", {{b + "mlp_norm.weight", d}}});
    links.push_back({hf + "mlp.gate_proj.weight", {{b + "mlp.w_gate", ff}}, d});
    links.push_back({hf + "mlp.up_proj.weight", {{b + "mlp.w_up", ff}}, d});
    links.push_back({hf + "mlp.down_proj.weight", {{b + "mlp.w_down", d}}, ff});
  }
  links.push_back({"model.norm.weight", {{"final_norm.weight", d}}});
  if (!m.tie_embeddings) links.push_back({"lm_head.weight", {{"lm_head.weight", V}}, d});
  return links;
}

namespace {

// transformers' "gelu_pytorch_tanh" is the same tanh approximation as GPT-2's "gelu_new".
nlohmann::json normalize_hf_activation(const nlohmann::json& value, const nlohmann::json&) {
  return value == "gelu_pytorch_tanh" ? nlohmann::json("gelu_new") : value;
}

std::vector<HfLink> gpt2_links(const config::ModelConfig& m) {
  const int64_t d = m.d_model, ff = m.d_ff, V = m.vocab_size;
  auto bias = [&](const std::string& weight, int64_t rows) {
    return HfPart{m.bias ? weight + "_bias" : "", rows};
  };
  std::vector<HfLink> links{{"transformer.wte.weight", {{"tok_emb.weight", V}}, d},
                            {"transformer.wpe.weight", {{"pos_emb.weight", m.max_seq_len}}, d}};
  for (int64_t l = 0; l < m.n_layers; ++l) {
    const std::string hf = fmt::format("transformer.h.{}.", l), b = fmt::format("blocks.{}.", l);
    const std::string q = b + "attn.wq", k = b + "attn.wk", v = b + "attn.wv";
    links.push_back({hf + "ln_1.weight", {{b + "attn_norm.weight", d}}});
    links.push_back({hf + "ln_1.bias", {{b + "attn_norm.bias", d}}});
    links.push_back({hf + "attn.c_attn.weight", {{q, d}, {k, d}, {v, d}}, d, true});
    links.push_back({hf + "attn.c_attn.bias", {bias(q, d), bias(k, d), bias(v, d)}});
    links.push_back({hf + "attn.c_proj.weight", {{b + "attn.wo", d}}, d, true});
    links.push_back({hf + "attn.c_proj.bias", {bias(b + "attn.wo", d)}});
    links.push_back({hf + "ln_2.weight", {{b + "mlp_norm.weight", d}}});
    links.push_back({hf + "ln_2.bias", {{b + "mlp_norm.bias", d}}});
    links.push_back({hf + "mlp.c_fc.weight", {{b + "mlp.w_up", ff}}, d, true});
    links.push_back({hf + "mlp.c_fc.bias", {bias(b + "mlp.w_up", ff)}});
    links.push_back({hf + "mlp.c_proj.weight", {{b + "mlp.w_down", d}}, ff, true});
    links.push_back({hf + "mlp.c_proj.bias", {bias(b + "mlp.w_down", d)}});
  }
  links.push_back({"transformer.ln_f.weight", {{"final_norm.weight", d}}});
  links.push_back({"transformer.ln_f.bias", {{"final_norm.bias", d}}});
  if (!m.tie_embeddings) links.push_back({"lm_head.weight", {{"lm_head.weight", V}}, d});
  return links;
}

}  // namespace

HfLayout llama_hf_layout(const config::ModelConfig& m) {
  if (m.qk_norm)
    throw Error("hf",
                "model.qk_norm = true has no Llama layout: LlamaForCausalLM has no q/k "
                "norms (model.kind = \"qwen3\" exports them, as Qwen3ForCausalLM)");
  const int64_t heads = m.n_heads, kv = m.kv_heads();
  std::vector<HfKey> keys{
      {"vocab_size", m.vocab_size, "model.vocab_size", nullptr},
      {"hidden_size", m.d_model, "model.d_model", nullptr},
      {"intermediate_size", m.d_ff, "model.d_ff", nullptr},
      {"num_hidden_layers", m.n_layers, "model.n_layers", nullptr},
      {"num_attention_heads", heads, "model.n_heads", nullptr},
      {"num_key_value_heads", kv, "model.n_kv_heads", heads},
      {"head_dim", m.head_size(),
       m.head_dim > 0 ? "model.head_dim" : "model.d_model / model.n_heads", m.d_model / heads},
      {"rms_norm_eps", m.norm_eps, "model.norm_eps", 1e-6},
      {"rope_theta", m.rope_theta, "model.rope_theta", 10000.0},
      {"tie_word_embeddings", m.tie_embeddings, "model.tie_embeddings", false},
      {"hidden_act", "silu", "model.mlp = \"swiglu\"", "silu"},
      {"attention_bias", false, "model.bias", false},
      {"mlp_bias", false, "model.bias", false},
      {"rope_scaling", hf_rope_scaling(m), "model.rope_scaling", nullptr, true,
       normalize_hf_rope_scaling},
      {"max_position_embeddings", m.max_seq_len, "model.max_seq_len", nullptr, false},
  };
  return {"llama",         "LlamaForCausalLM",          llama_hf_links(m),
          std::move(keys), "model.embed_tokens.weight", ""};
}

HfLayout gpt2_hf_layout(const config::ModelConfig& m) {
  const int64_t heads = m.n_heads;
  std::vector<HfKey> keys{
      {"vocab_size", m.vocab_size, "model.vocab_size", nullptr},
      {"n_embd", m.d_model, "model.d_model", nullptr},
      {"n_inner", m.d_ff, "model.d_ff", 4 * m.d_model},
      {"n_layer", m.n_layers, "model.n_layers", nullptr},
      {"n_head", heads, "model.n_heads", nullptr},
      {"n_positions", m.max_seq_len, "model.max_seq_len", nullptr},
      {"layer_norm_epsilon", m.norm_eps, "model.norm_eps", 1e-5},
      // GPT-2's own "gelu_new" is the tanh approximation (model.mlp = "gelu_tanh"); "gelu" the
      // exact erf form.
      {"activation_function", m.mlp == "gelu_tanh" ? "gelu_new" : "gelu",
       m.mlp == "gelu_tanh" ? "model.mlp = \"gelu_tanh\"" : "model.mlp = \"gelu\" (exact erf)",
       "gelu_new", true, normalize_hf_activation},
      {"tie_word_embeddings", m.tie_embeddings, "model.tie_embeddings", true},
      {"scale_attn_weights", true, "(attention scaled by 1/sqrt(head dim))", true},
      {"scale_attn_by_inverse_layer_idx", false, "(no per-layer attention scaling)", false},
      {"n_ctx", m.max_seq_len, "model.max_seq_len", nullptr, false},
  };
  return {"gpt2",          "GPT2LMHeadModel",        gpt2_links(m),
          std::move(keys), "transformer.wte.weight", "transformer."};
}

HfLayout dense_decoder_hf_layout(const config::ModelConfig& m) {
  if (m.norm == "rmsnorm" && m.mlp == "swiglu" && m.positions == "rope" && !m.bias)
    return llama_hf_layout(m);
  // GPT-2's heads are n_embd / n_head wide, and it has no q/k norms.
  if (m.norm == "layernorm" && (m.mlp == "gelu" || m.mlp == "gelu_tanh") &&
      m.positions == "learned" && m.kv_heads() == m.n_heads &&
      m.head_size() * m.n_heads == m.d_model && !m.qk_norm)
    return gpt2_hf_layout(m);
  throw Error("hf",
              fmt::format("model.norm = \"{}\", mlp = \"{}\", positions = \"{}\", bias = {}, "
                          "n_kv_heads = {}, head_dim = {}, qk_norm = {} fit no Hugging Face "
                          "layout: Llama needs rmsnorm, swiglu, rope and no biases; GPT-2 "
                          "layernorm, gelu or gelu_tanh, learned positions, no grouped-query "
                          "attention, "
                          "heads of d_model / n_heads and no q/k norms",
                          m.norm, m.mlp, m.positions, m.bias, m.n_kv_heads, m.head_dim, m.qk_norm));
}

}  // namespace mixprec::models
