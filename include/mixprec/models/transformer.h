// Transformer language models from config::ModelConfig: kind "gpt" (dense MLP) or "moe"
// (every block's MLP is a mixture of experts, models/moe.h).
//
//   h = tok_emb[tokens] (+ pos_emb[0..T) when positions = learned)
//   per block l:  h += attn(norm(h));  h += mlp_or_moe(norm(h))      (pre-norm)
//   logits = lm_head(final_norm(h))     (lm_head = tok_emb when tie_embeddings)
//
// Attention is causal multi-head with the fused op; separate q/k/v/o projections (q and k
// carry the heads role for Adam-mini), RoPE on q and k when positions = rope. Linear biases
// only with model.bias (GPT-2 style, "<weight>_bias", zero-initialised, no weight decay);
// LayerNorm has its bias. Each submodule runs in an amp::ModuleScope
// named like its parameters ("tok_emb", "blocks.3.attn", "blocks.3.moe", "final_norm",
// "lm_head"), so autocast's fp32_modules globs reach them.
//
// Parameter names (GPT-2 init: N(0, 0.02); residual outputs wo and w_down N(0, 0.02/sqrt(2L));
// norm gains 1, biases 0):
//   tok_emb.weight [V, d], pos_emb.weight [max_seq_len, d] (learned), lm_head.weight [V, d]
//   (untied), final_norm.weight (+ .bias), and per block blocks.<l>.:
//   attn_norm.weight/.bias, attn.wq/wk/wv/wo [d, d], mlp_norm.weight/.bias,
//   gpt: mlp.w_gate (swiglu), mlp.w_up [d_ff, d], mlp.w_down [d, d_ff];
//   moe: moe.router [E, d], moe.experts.<e>.w_gate/w_up/w_down.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mixprec/config/train_config.h"
#include "mixprec/models/moe.h"
#include "mixprec/models/parameter_set.h"
#include "mixprec/models/unit_hooks.h"

namespace mixprec::models {

struct LossParts {
  Tensor total;  // ce + aux_loss_weight·aux + z_loss_weight·z, f32 scalar
  Tensor ce;     // mean token cross-entropy
  Tensor aux;    // mean over MoE layers of the load-balancing loss (0 for gpt)
  Tensor z;      // mean over MoE layers of the router z-loss (0 for gpt)
};

class Transformer {
 public:
  // Describes every parameter (meta: nothing allocated). Checks the config.
  explicit Transformer(const config::ModelConfig& config);

  const config::ModelConfig& config() const { return config_; }
  ParameterSet& parameters() { return params_; }
  const ParameterSet& parameters() const { return params_; }
  void materialize(uint64_t seed, const amp::MixedPrecisionPolicy& policy) {
    params_.materialize(seed, policy);
  }

  // tokens [B, T] (i32/i64, T <= max_seq_len) -> logits [B, T, vocab_size].
  Tensor forward(const Tensor& tokens);
  // Cross-entropy of forward(tokens) against targets [B, T], plus the MoE losses.
  LossParts loss(const Tensor& tokens, const Tensor& targets);

  // From the last forward: one entry per MoE block (empty for gpt), and the routers' logits.
  const std::vector<MoeLayerStats>& moe_stats() const { return moe_stats_; }
  const std::vector<Tensor>& router_logits() const { return router_logits_; }

  // Routes weights and block boundaries through `hooks` (null: the ParameterSet's working
  // copies). The hooks must outlive every forward and backward that uses them.
  void set_unit_hooks(UnitHooks* hooks) { hooks_ = hooks; }
  UnitHooks* unit_hooks() const { return hooks_; }

 private:
  const Tensor& weight(const std::string& name) const {
    return hooks_ ? hooks_->weight(name) : params_.value(name);
  }
  Tensor norm(const Tensor& x, const std::string& prefix, const char* name) const;
  Tensor attention(const Tensor& x, const std::string& prefix) const;
  // linear(x, weight, its bias when config.bias) for the parameter named `weight`.
  Tensor project(const Tensor& x, const std::string& weight) const;
  Tensor bias(const std::string& weight) const;  // undefined without config.bias
  FeedForwardWeights ffn_weights(const std::string& prefix) const;
  Tensor block(const Tensor& h, int64_t layer);
  void describe();

  config::ModelConfig config_;
  MlpKind mlp_;
  bool layernorm_, rope_, moe_;
  ParameterSet params_;
  UnitHooks* hooks_ = nullptr;
  std::vector<MoeLayerStats> moe_stats_;
  std::vector<Tensor> router_logits_, aux_losses_, z_losses_;
};

}  // namespace mixprec::models
