// The decoder-only transformer the gpt, llama3, qwen3 and moe families (models/<family>/)
// build: a language model from config::ModelConfig and the family's DecoderArch: a dense MLP
// in every block, or a mixture of experts (models/transformer/moe.h) from
// model.moe.n_dense_layers on; GPT-2's, torchtitan's Llama 3 or a plain N(0, 0.02)
// initialisation (DecoderInit).
//
//   h = tok_emb[tokens] (+ pos_emb[0..T) when positions = learned)
//   per block l:  h += attn(norm(h));  h += mlp_or_moe(norm(h))      (pre-norm)
//   logits = lm_head(final_norm(h))     (lm_head = tok_emb when tie_embeddings)
//
// Attention is causal multi-head with the fused op; separate q/k/v/o projections (q and k
// carry the heads role for Adam-mini) to heads of Dh = model.head_dim (d / n_heads when 0),
// scaled by Dh^-1/2. With model.qk_norm, q and k are RMS-normalised over each head's Dh
// features (eps model.norm_eps, one gain [Dh] each per block, f32 under autocast like the
// other norms) after the head split and before RoPE, as Qwen 3's q_norm/k_norm. RoPE
// (rotate-half, Hugging Face's convention, base model.rope_theta) on q and k when positions =
// rope. With model.n_kv_heads < n_heads, wk and wv project to n_kv_heads heads, each shared
// by n_heads / n_kv_heads query heads (GQA). Linear biases only with model.bias (GPT-2 style,
// "<weight>_bias", zero-initialised, no weight decay); LayerNorm has its bias. Each submodule
// runs in an amp::ModuleScope named like its parameters ("tok_emb", "blocks.3.attn",
// "blocks.3.attn.q_norm", "blocks.3.moe", "final_norm", "lm_head"), so autocast's
// fp32_modules globs reach them.
//
// Parameter names (GPT-2 init: N(0, 0.02); residual outputs wo and w_down N(0, 0.02/sqrt(2L));
// norm gains 1, biases 0. llama3, torchtitan's: tok_emb N(0, 1); wo, w_up and w_down of layer l
// N(0, 0.02/sqrt(2(l+1))); lm_head N(0, d^-1/2) truncated at 3 std. plain: every weight
// N(0, 0.02), norm gains 1), with q = n_heads·Dh and kv = n_kv_heads·Dh:
//   tok_emb.weight [V, d], pos_emb.weight [max_seq_len, d] (learned), lm_head.weight [V, d]
//   (untied), final_norm.weight (+ .bias), and per block blocks.<l>.:
//   attn_norm.weight/.bias, attn.wq [q, d], attn.wk/wv [kv, d], attn.wo [d, q],
//   attn.q_norm.weight/attn.k_norm.weight [Dh] (qk_norm), mlp_norm.weight/.bias,
//   gpt: mlp.w_gate (swiglu), mlp.w_up [d_ff, d], mlp.w_down [d, d_ff];
//   moe: moe.router [E, d]; the routed experts stacked (model.moe.idle_experts = "step",
//   torchtitan's) moe.experts.w_gate/w_up [E, d_ff, d], moe.experts.w_down [E, d, d_ff] (biases
//   [E, d_ff] / [E, d]; expert e's slice initialised as moe.experts.<e>.w_gate would be), or
//   one set per expert ("skip", Hugging Face's) moe.experts.<e>.w_gate/w_up/w_down; with shared
//   experts moe.shared_experts.w_gate/w_up/w_down [n_shared·d_ff, d]; its first
//   model.moe.n_dense_layers blocks are gpt blocks with d_ff = model.moe.dense_d_ff.
// Buffers (Model::buffers): with model.moe.load_balance_coeff > 0, blocks.<l>.moe.expert_bias
// [E] f32 per MoE block, zero at the start.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mixprec/models/model.h"
#include "mixprec/models/transformer/moe.h"
#include "mixprec/ops/rope_scaling.h"

namespace mixprec::models {

// How the decoder's weights start (the parameter list above gives each rule).
enum class DecoderInit {
  gpt2,         // GPT-2's / nanoGPT's: residual outputs scaled by the whole model's depth
  titan_llama,  // torchtitan's Llama 3: depth-scaled by the layer's own, N(0, 1) embedding
  plain,        // every linear and the embedding N(0, 0.02), no depth scaling
};

// What a family decides about the decoder beyond its config.
struct DecoderArch {
  DecoderInit init = DecoderInit::gpt2;
  // Blocks from model.moe.n_dense_layers on have a mixture of experts as their MLP.
  bool experts = false;
  // Multi-head latent attention ([model.mla], DeepSeek-V3's) in place of q/k/v projections.
  bool latent_attention = false;
};

class Transformer final : public Model {
 public:
  // Describes every parameter (meta: nothing allocated), from a config its family's
  // check_config accepted (models::make_model checks it).
  Transformer(const config::ModelConfig& config, const DecoderArch& arch);
  Transformer(Transformer&&) = default;  // before any hooks: a family hands its value out

  Tensor forward(const Tensor& tokens) override;
  // A key/value cache per block, [B, n_kv_heads, max_seq_len, Dh] (latent attention: every
  // head's key and value, padded to one width), in the dtype attention receives k and v (the
  // compute dtype; k in f32 under autocast with model.qk_norm, the norm's output, as the
  // whole-sequence forward hands it on).
  std::unique_ptr<DecodeState> start_decoding(int64_t batch) override;
  Tensor decode(const Tensor& tokens, DecodeState& state) override;
  LossParts loss(const Tensor& tokens, const Tensor& targets) override;
  // "root", then "blocks.0", "blocks.1", ...: a block's parameters are "blocks.<l>.*".
  std::vector<std::string> shard_units() const override;
  ActivationEstimate estimate_activations(const amp::MixedPrecisionPolicy& policy,
                                          int64_t sequences, int64_t seq_len) const override;
  std::string describe() const override;
  std::optional<int64_t> active_parameter_count() const override;  // moe only
  // The tokens routed to each expert, MoE block after MoE block (Model::step_counts).
  std::vector<int64_t> step_counts() const override;
  // DeepSeek-V3's expert-bias update (torchtitan's): per MoE block, with c_e its count and c̄
  // their mean, δ_e = coeff · sign(c̄ - c_e), bias_e += δ_e - mean(δ) (in f64, rounded once
  // into f32). A no-op without expert biases.
  void update_buffers(const std::vector<int64_t>& counts) override;
  std::vector<std::vector<double>> count_loads(const std::vector<int64_t>& counts) const override;

  // From the last forward: one entry per MoE block (empty for gpt), and the routers' logits.
  // MoE blocks are the blocks from model.moe.n_dense_layers on.
  const std::vector<MoeLayerStats>& moe_stats() const { return moe_stats_; }
  const std::vector<Tensor>& router_logits() const { return router_logits_; }

 private:
  struct KvCache;
  // x cast the way a linear layer here would cast it (autocast, with its op and module
  // overrides), once: several projections of one input then share one low-precision copy
  // (saved once for backward) instead of each making its own.
  static Tensor as_linear_input(const Tensor& x);
  // forward() without a cache; decode() with one (positions from cache->length()).
  Tensor run(const Tensor& tokens, KvCache* cache);
  Tensor norm(const Tensor& x, const std::string& prefix, const char* name) const;
  Tensor attention(const Tensor& x, const std::string& prefix, KvCache* cache, int64_t layer) const;
  // Attention's q, k, v [B, heads, T, width] at positions offset.., RoPE applied, before the
  // cache and SDPA.
  struct AttentionInputs {
    Tensor q, k, v;
  };
  // Heads of head_dim_ (kv_heads_ for k and v), with model.qk_norm's norms.
  AttentionInputs head_qkv(const Tensor& x, const std::string& prefix, int64_t offset) const;
  // DecoderArch::latent_attention's (latent_attention.cpp): every head, q, k and v padded with
  // zeros to D = max(nope + rope, v).
  AttentionInputs latent_qkv(const Tensor& x, const std::string& prefix, int64_t offset) const;
  // softmax(q·kᵀ·scale) with model.mla's scale (nope + rope)^-1/2 · YaRN's mscale².
  double latent_softmax_scale() const;
  // RMSNorm without a bias, by blocks.<l>.attn.<name>.weight, of x over its last dim.
  Tensor attn_rmsnorm(const Tensor& x, const std::string& prefix, const char* name) const;
  // linear(x, weight, its bias when config.bias) for the parameter named `weight`.
  Tensor project(const Tensor& x, const std::string& weight) const;
  Tensor bias(const std::string& weight) const;  // undefined without config.bias
  FeedForwardWeights ffn_weights(const std::string& prefix) const;
  Tensor block(const Tensor& h, int64_t layer, KvCache* cache);
  // The block's MLP on its normed input x: dense, or the MoE layer (recording its stats).
  Tensor mlp(const Tensor& x, int64_t layer, const std::string& prefix);
  Tensor moe(const Tensor& x, int64_t layer, const std::string& prefix);
  bool moe_block(int64_t layer) const {
    return arch_.experts && layer >= config_.moe.n_dense_layers;
  }
  // "blocks.<layer>": the block's shard unit and its parameters' prefix.
  static std::string block_unit(int64_t layer) { return "blocks." + std::to_string(layer); }
  void describe_parameters();

  DecoderArch arch_;
  RopeFrequencies rope_frequencies_;  // model.rope_theta and model.rope_scaling, per head
  MlpKind mlp_;
  bool layernorm_, rope_;
  bool stacked_experts_;             // model.moe.idle_experts = "step": one parameter per weight
  int64_t kv_heads_;                 // model.n_kv_heads, or n_heads when it is 0
  int64_t head_dim_;                 // model.head_dim, or d_model / n_heads when it is 0
  MoeOptions moe_options_;           // the routing the config asks for (not global_counts)
  std::vector<Tensor> expert_bias_;  // per MoE block (empty: no bias); also in buffers_
  std::vector<MoeLayerStats> moe_stats_;
  std::vector<Tensor> router_logits_, aux_losses_, z_losses_;
};

}  // namespace mixprec::models
