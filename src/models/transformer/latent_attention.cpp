// Multi-head latent attention (DecoderArch::latent_attention; [model.mla] in train_config.h):
// DeepSeek-V3's queries, keys and values, as torchtitan's deepseek_v3 Attention computes them.
// Our RoPE is rotate-half on each rope part (torchtitan and DeepSeek's reference rotate
// adjacent pairs; the Hugging Face layout permutes those rows, deepseek_v3/hf_layout.cpp).
#include <algorithm>
#include <cmath>
#include <vector>

#include "mixprec/models/transformer/transformer.h"
#include "mixprec/ops.h"

namespace mixprec::models {

Transformer::AttentionInputs Transformer::latent_qkv(const Tensor& x_in, const std::string& prefix,
                                                     int64_t offset) const {
  const config::MlaConfig& m = config_.mla;
  const int64_t B = x_in.size(0), T = x_in.size(1), H = config_.n_heads;
  const int64_t nope = m.qk_nope_head_dim, pe = m.qk_rope_head_dim, vw = m.v_head_dim;
  const int64_t qk = nope + pe, r = m.kv_lora_rank;
  const Tensor x = as_linear_input(x_in);  // read by wq (or wq_a) and wkv_a

  // Queries [B, H, T, nope + rope]: one projection, or the low-rank pair with its norm.
  const Tensor q_flat =
      m.q_lora_rank == 0 ? project(x, prefix + "attn.wq")
                         : project(attn_rmsnorm(project(x, prefix + "attn.wq_a"), prefix, "q_norm"),
                                   prefix + "attn.wq_b");
  const Tensor q = q_flat.view({B, T, H, qk}).permute({0, 2, 1, 3});
  // The latent and the one RoPE key every head shares: [B, T, r + rope].
  const Tensor kv = project(x, prefix + "attn.wkv_a");
  const Tensor latent = attn_rmsnorm(kv.slice(2, 0, r), prefix, "kv_norm");
  const Tensor kv_heads =
      project(latent, prefix + "attn.wkv_b").view({B, T, H, nope + vw}).permute({0, 2, 1, 3});
  const DType dtype = kv_heads.dtype();
  // Every projection gives the compute dtype, and RoPE keeps its input's ("as_given").
  const Tensor q_pe = rope(q.slice(3, nope, qk), rope_frequencies_, offset);
  const Tensor k_pe = rope(kv.slice(2, r, r + pe).unsqueeze(1), rope_frequencies_, offset);

  // SDPA takes one width for q, k and v: the narrower side gets zero columns, which add
  // nothing to q·kᵀ and give output columns that are dropped (torchtitan pads v so too).
  const int64_t D = std::max(qk, vw);
  auto padded = [&](std::vector<Tensor> parts, int64_t width) {
    if (width < D) parts.push_back(Tensor::zeros({B, H, T, D - width}, dtype));
    return parts.size() == 1 ? parts[0].contiguous() : concat(parts, 3);
  };
  AttentionInputs out;
  out.q = padded({q.slice(3, 0, nope), q_pe}, qk);
  out.k = padded({kv_heads.slice(3, 0, nope), broadcast_to(k_pe, {B, H, T, pe})}, qk);
  out.v = padded({kv_heads.slice(3, nope, nope + vw)}, vw);
  return out;
}

double Transformer::latent_softmax_scale() const {
  const config::MlaConfig& m = config_.mla;
  double scale = 1.0 / std::sqrt(static_cast<double>(m.qk_nope_head_dim + m.qk_rope_head_dim));
  // Hugging Face's and torchtitan's YaRN correction of the scores (not of cos/sin): a longer
  // context flattens softmax, and mscale² restores its sharpness.
  const config::RopeScalingConfig& s = config_.rope_scaling;
  if (s.type == "yarn" && s.mscale_all_dim > 0) {
    const double mscale = yarn_get_mscale(s.factor, s.mscale_all_dim);
    scale *= mscale * mscale;
  }
  return scale;
}

}  // namespace mixprec::models
