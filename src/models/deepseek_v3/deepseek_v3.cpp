// The deepseek_v3 family's spec (deepseek_v3.h): its rules and its model; the Hugging Face
// layout is deepseek_v3_hf.cpp's.
#include "mixprec/models/deepseek_v3/deepseek_v3.h"

#include <algorithm>
#include <string>

#include "deepseek_v3_hf.h"
#include "mixprec/models/moe/moe_family.h"
#include "mixprec/models/transformer/decoder_rules.h"
#include "mixprec/models/transformer/transformer.h"

namespace mixprec::models::deepseek_v3 {
namespace {

void check_latent_attention(const config::ModelConfig& m, const config::ConfigRules& c) {
  const config::MlaConfig& a = m.mla;
  c.require(a.q_lora_rank >= 0, "model.mla.q_lora_rank", "must be >= 0 (0 = one wq)");
  c.require(a.kv_lora_rank > 0, "model.mla.kv_lora_rank", "must be > 0");
  c.require(a.qk_nope_head_dim >= 0, "model.mla.qk_nope_head_dim", "must be >= 0");
  c.require(a.qk_rope_head_dim > 0 && a.qk_rope_head_dim % 2 == 0, "model.mla.qk_rope_head_dim",
            "must be even and > 0 (RoPE turns pairs of features)");
  c.require(a.v_head_dim > 0, "model.mla.v_head_dim", "must be > 0");
  for (const auto& [key, value] : {std::pair{"model.mla.q_lora_rank", a.q_lora_rank},
                                   std::pair{"model.mla.kv_lora_rank", a.kv_lora_rank},
                                   std::pair{"model.mla.qk_nope_head_dim", a.qk_nope_head_dim},
                                   std::pair{"model.mla.qk_rope_head_dim", a.qk_rope_head_dim},
                                   std::pair{"model.mla.v_head_dim", a.v_head_dim}})
    check_bound(c, key, value, kMaxModelWidth);
  // The widest projections' outputs and weights, as the shared rules bound wq's.
  const double H = static_cast<double>(m.n_heads), d = static_cast<double>(m.d_model);
  const double qk = H * static_cast<double>(a.qk_nope_head_dim + a.qk_rope_head_dim);
  const double kv = H * static_cast<double>(a.qk_nope_head_dim + a.v_head_dim);
  const double width = static_cast<double>(kMaxModelWidth);
  c.require(qk <= width && kv <= width, "model.mla.qk_nope_head_dim",
            "with qk_rope_head_dim (or v_head_dim) times model.n_heads must be <= " +
                std::to_string(kMaxModelWidth) + " (the heads' width)");
  const double q_in = a.q_lora_rank > 0 ? static_cast<double>(a.q_lora_rank) : d;
  c.require(qk * std::max(q_in, d) <= kMaxLayerWeights &&
                kv * static_cast<double>(a.kv_lora_rank) <= kMaxLayerWeights &&
                static_cast<double>(a.kv_lora_rank + a.qk_rope_head_dim) * d <= kMaxLayerWeights,
            "model.mla.kv_lora_rank",
            "and the head widths give a projection of more than 2^40 weights");
}

void check(const config::ModelConfig& m, const config::ConfigRules& c) {
  moe::check_moe_config(m, c);
  // The architecture is fixed; the keys that would change it must say so.
  const std::string family = " for model.kind = \"deepseek_v3\"";
  c.require(m.norm == "rmsnorm", "model.norm", "must be \"rmsnorm\"" + family);
  c.require(m.mlp == "swiglu", "model.mlp", "must be \"swiglu\"" + family);
  c.require(m.positions == "rope", "model.positions", "must be \"rope\"" + family);
  c.require(!m.bias, "model.bias", "must be false" + family + " (no biases)");
  c.require(!m.qk_norm, "model.qk_norm",
            "must be false" + family + " (latent attention normalises its latents instead)");
  c.require(m.head_dim == 0, "model.head_dim",
            "must be 0" + family + " (the heads' widths are model.mla's)");
  c.require(m.n_kv_heads == 0 || m.n_kv_heads == m.n_heads, "model.n_kv_heads",
            "must be 0 or " + c.show("model.n_heads") + family +
                " (every head's keys come from the shared latent)");
  check_latent_attention(m, c);
}

// torchtitan's deepseek_v3 init (titan_llama with the router depth-scaled): projections
// N(0, 0.02); wo, the MLPs' and experts' w_up and w_down, and the router N(0, 0.02/sqrt(2(l+1)));
// embedding N(0, 1); output N(0, d^-1/2) truncated at 3 std; norm gains 1.
std::unique_ptr<Model> make(const config::ModelConfig& m) {
  return std::make_unique<Transformer>(
      m, DecoderArch{.init = DecoderInit::titan_llama, .experts = true, .latent_attention = true});
}

}  // namespace

const ModelSpec kSpec{"deepseek_v3",
                      "torchtitan's DeepSeek-V3: multi-head latent attention and DeepSeek's "
                      "mixture of experts",
                      check,
                      make,
                      hf_layout,
                      moe::size_keys,
                      moe::block_kinds,
                      moe::with_blocks,
                      moe::other_layouts};

}  // namespace mixprec::models::deepseek_v3
