// Transformer forward pass and loss.
#include <cmath>
#include <memory>
#include <string>

#include "mixprec/amp/autocast.h"
#include "mixprec/autograd/checkpoint.h"
#include "mixprec/autograd/grad_mode.h"
#include "mixprec/models/transformer/transformer.h"
#include "mixprec/ops.h"

namespace mixprec::models {
Tensor Transformer::as_linear_input(const Tensor& x) {
  const auto args = amp::autocast_args("linear", x);
  return args.get<0>();
}

// The keys and values each block has seen, written in place as positions are decoded.
struct Transformer::KvCache final : DecodeState {
  // per block [B, Hkv, max_seq_len, Dh] (latent attention: every head, its padded width)
  std::vector<Tensor> k, v;
  int64_t len = 0;
  int64_t length() const override { return len; }
};

// `prefix` is "blocks.3." or "" (top level); `name` the norm's own name.
Tensor Transformer::norm(const Tensor& x, const std::string& prefix, const char* name) const {
  amp::ModuleScope scope(name);
  const std::string full = prefix + name;
  const Tensor& w = weight(full + ".weight");
  return layernorm_ ? layernorm(x, w, weight(full + ".bias"), config_.norm_eps)
                    : rmsnorm(x, w, config_.norm_eps);
}

Tensor Transformer::attn_rmsnorm(const Tensor& x, const std::string& prefix,
                                 const char* name) const {
  amp::ModuleScope scope(name);
  return rmsnorm(x, weight(prefix + "attn." + name + ".weight"), config_.norm_eps);
}

Transformer::AttentionInputs Transformer::head_qkv(const Tensor& x_in, const std::string& prefix,
                                                   int64_t offset) const {
  const int64_t B = x_in.size(0), T = x_in.size(1), Dh = head_dim_;
  const Tensor x = as_linear_input(x_in);
  // [B, T, n·Dh] -> [B, n, T, Dh] (a strided view of the projection); k and v have
  // kv_heads_. model.qk_norm normalises each head's Dh features first, on the contiguous
  // [B, T, n, Dh] view (Hugging Face's order: before the transpose and before RoPE).
  auto heads = [&](const char* name, int64_t n, const char* norm) {
    Tensor t = project(x, prefix + name).view({B, T, n, Dh});
    if (norm) t = attn_rmsnorm(t, prefix, norm);
    return t.permute({0, 2, 1, 3});
  };
  const bool qk_norm = config_.qk_norm;
  AttentionInputs in{heads("attn.wq", config_.n_heads, qk_norm ? "q_norm" : nullptr),
                     heads("attn.wk", kv_heads_, qk_norm ? "k_norm" : nullptr),
                     heads("attn.wv", kv_heads_, nullptr)};
  if (rope_) {
    in.q = rope(in.q, rope_frequencies_, offset);
    in.k = rope(in.k, rope_frequencies_, offset);
  }
  return in;
}

Tensor Transformer::attention(const Tensor& x_in, const std::string& prefix, KvCache* cache,
                              int64_t layer) const {
  amp::ModuleScope scope("attn");
  const int64_t B = x_in.size(0), T = x_in.size(1), H = config_.n_heads;
  const int64_t offset = cache ? cache->len : 0;
  const bool latent = arch_.latent_attention;
  AttentionInputs in = latent ? latent_qkv(x_in, prefix, offset) : head_qkv(x_in, prefix, offset);
  const Tensor& q = in.q;
  Tensor k = in.k, v = in.v;
  const int64_t width = latent ? config_.mla.v_head_dim : head_dim_;   // of each head's output
  const double softmax_scale = latent ? latent_softmax_scale() : 0.0;  // 0: SDPA's Dh^-1/2
  if (cache) {
    auto& ck = cache->k[static_cast<std::size_t>(layer)];
    auto& cv = cache->v[static_cast<std::size_t>(layer)];
    if (!ck.defined()) {
      ck = Tensor::empty({B, k.size(1), config_.max_seq_len, k.size(3)}, k.dtype());
      cv = Tensor::empty({B, v.size(1), config_.max_seq_len, v.size(3)}, v.dtype());
    }
    ck.slice(2, offset, offset + T).copy_from(k);
    cv.slice(2, offset, offset + T).copy_from(v);
    k = ck.slice(2, 0, offset + T);
    v = cv.slice(2, 0, offset + T);
  }
  // After the prompt, one new query sees every cached key: no mask (decode() allows one
  // token at a time then), the same fused kernel as the whole-sequence forward.
  Tensor a = scaled_dot_product_attention(q, k, v, /*causal=*/offset == 0, softmax_scale);
  if (a.size(3) != width) a = a.slice(3, 0, width);  // latent attention's zero padding
  return project(a.transpose(1, 2).reshape({B, T, H * width}), prefix + "attn.wo");
}

Tensor Transformer::project(const Tensor& x, const std::string& weight) const {
  // Under the weight's own name ("blocks.0.attn.wq"): module filters can pick it out.
  const amp::ModuleScope scope(std::string_view(weight).substr(weight.rfind('.') + 1));
  return linear(x, Transformer::weight(weight), bias(weight));
}

Tensor Transformer::bias(const std::string& weight) const {
  return config_.bias ? Transformer::weight(weight + "_bias") : Tensor();
}

FeedForwardWeights Transformer::ffn_weights(const std::string& prefix) const {
  FeedForwardWeights w;
  if (mlp_ == MlpKind::swiglu) {
    w.w_gate = weight(prefix + ".w_gate");
    w.b_gate = bias(prefix + ".w_gate");
  }
  w.w_up = weight(prefix + ".w_up");
  w.b_up = bias(prefix + ".w_up");
  w.w_down = weight(prefix + ".w_down");
  w.b_down = bias(prefix + ".w_down");
  return w;
}

Tensor Transformer::block(const Tensor& h_in, int64_t layer, KvCache* cache) {
  const std::string name = block_unit(layer);
  const std::string prefix = name + ".";
  amp::ModuleScope scope(name);
  const Tensor h = add(h_in, attention(norm(h_in, prefix, "attn_norm"), prefix, cache, layer));
  return add(h, mlp(norm(h, prefix, "mlp_norm"), layer, prefix));
}

Tensor Transformer::mlp(const Tensor& x, int64_t layer, const std::string& prefix) {
  if (moe_block(layer)) return moe(x, layer, prefix);
  amp::ModuleScope mlp_scope("mlp");
  return feed_forward(as_linear_input(x), ffn_weights(prefix + "mlp"), mlp_);
}

Tensor Transformer::moe(const Tensor& x, int64_t layer, const std::string& prefix) {
  amp::ModuleScope moe_scope("moe");
  const config::MoeConfig& c = config_.moe;
  // The experts' shared input in their compute dtype: tokens are gathered, and the combined
  // output returned, in it (as PyTorch's autocast MoE), f32 accumulation inside.
  const Tensor xe = as_linear_input(x);
  MoeWeights w;
  w.router = weight(prefix + "moe.router");
  if (stacked_experts_)
    w.stacked = ffn_weights(prefix + "moe.experts");
  else
    for (int64_t e = 0; e < c.n_experts; ++e)
      w.experts.push_back(ffn_weights(prefix + "moe.experts." + std::to_string(e)));
  if (c.n_shared_experts > 0) w.shared = ffn_weights(prefix + "moe.shared_experts");
  if (!expert_bias_.empty())
    w.expert_bias = expert_bias_[static_cast<std::size_t>(layer - c.n_dense_layers)];
  MoeOptions options = moe_options_;
  // Global-batch balancing: the aux loss counts every rank's rows. Only a training forward
  // needs it (evaluation reports cross-entropy), and every rank's makes the same calls.
  if (c.balance_scope == "global" && c.aux_loss_weight > 0 && unit_hooks() &&
      GradMode::is_enabled())
    options.global_counts = [hooks = unit_hooks()](std::vector<int64_t>& counts) {
      hooks->sum_counts_over_ranks(counts);
    };
  const int64_t B = x.size(0), T = x.size(1), d = config_.d_model;
  MoeOutput m = moe_forward(xe.reshape({B * T, d}), w, options);
  moe_stats_.push_back(std::move(m.stats));
  router_logits_.push_back(m.router_logits);
  aux_losses_.push_back(m.aux_loss);
  z_losses_.push_back(m.z_loss);
  return m.out.view({B, T, d});
}

std::vector<int64_t> Transformer::step_counts() const {
  std::vector<int64_t> counts;
  for (const MoeLayerStats& s : moe_stats_)
    counts.insert(counts.end(), s.routed.begin(), s.routed.end());
  return counts;
}

void Transformer::update_buffers(const std::vector<int64_t>& counts) {
  if (expert_bias_.empty()) return;
  const auto E = static_cast<std::size_t>(config_.moe.n_experts);
  MIXPREC_CHECK(counts.size() == E * expert_bias_.size(), "Transformer::update_buffers",
                std::to_string(counts.size()) + " counts for " +
                    std::to_string(expert_bias_.size()) + " MoE blocks of " + std::to_string(E) +
                    " experts");
  const double coeff = config_.moe.load_balance_coeff;
  for (std::size_t l = 0; l < expert_bias_.size(); ++l) {
    const int64_t* c = counts.data() + l * E;
    double mean = 0;
    for (std::size_t e = 0; e < E; ++e) mean += static_cast<double>(c[e]);
    mean /= static_cast<double>(E);
    std::vector<double> delta(E);
    double delta_mean = 0;
    for (std::size_t e = 0; e < E; ++e) {
      const double gap = mean - static_cast<double>(c[e]);
      delta[e] = coeff * static_cast<double>((gap > 0) - (gap < 0));
      delta_mean += delta[e];
    }
    delta_mean /= static_cast<double>(E);
    float* bias = expert_bias_[l].data<float>();
    for (std::size_t e = 0; e < E; ++e)
      bias[e] = static_cast<float>(static_cast<double>(bias[e]) + delta[e] - delta_mean);
  }
}

std::vector<std::vector<double>> Transformer::count_loads(
    const std::vector<int64_t>& counts) const {
  std::vector<std::vector<double>> loads;
  if (!arch_.experts) return loads;
  const auto E = static_cast<std::size_t>(config_.moe.n_experts);
  for (std::size_t b = 0; b + E <= counts.size(); b += E) {
    double total = 0;
    for (std::size_t e = 0; e < E; ++e) total += static_cast<double>(counts[b + e]);
    std::vector<double> block(E, 0.0);
    if (total > 0)
      for (std::size_t e = 0; e < E; ++e)
        block[e] = static_cast<double>(counts[b + e]) * static_cast<double>(E) / total;
    loads.push_back(std::move(block));
  }
  return loads;
}

Tensor Transformer::forward(const Tensor& tokens) {
  return run(tokens, nullptr);
}

std::unique_ptr<DecodeState> Transformer::start_decoding(int64_t batch) {
  MIXPREC_CHECK(batch >= 1, "Transformer::start_decoding",
                "batch " + std::to_string(batch) + " < 1");
  auto cache = std::make_unique<KvCache>();
  cache->k.resize(static_cast<std::size_t>(config_.n_layers));
  cache->v.resize(static_cast<std::size_t>(config_.n_layers));
  return cache;
}

Tensor Transformer::decode(const Tensor& tokens, DecodeState& state) {
  auto* cache = dynamic_cast<KvCache*>(&state);
  MIXPREC_CHECK(cache != nullptr, "Transformer::decode", "the state is not this family's");
  MIXPREC_CHECK(tokens.ndim() == 2, "Transformer::decode",
                "expects tokens [B, n], got " + shape_to_string(tokens.shape()));
  const int64_t n = tokens.size(1);
  MIXPREC_CHECK(cache->len == 0 || n == 1, "Transformer::decode",
                "after the prompt, one token at a time (got " + std::to_string(n) + ")");
  MIXPREC_CHECK(cache->len + n <= config_.max_seq_len, "Transformer::decode",
                "positions " + std::to_string(cache->len) + " + " + std::to_string(n) +
                    " exceed model.max_seq_len = " + std::to_string(config_.max_seq_len));
  NoGradGuard no_grad;
  Tensor logits = run(tokens, cache);
  cache->len += n;
  return logits;
}

Tensor Transformer::run(const Tensor& tokens, KvCache* cache) {
  MIXPREC_CHECK(
      tokens.ndim() == 2 && (tokens.dtype() == DType::i64 || tokens.dtype() == DType::i32),
      "Transformer::forward",
      "expects integer tokens [B, T], got " + shape_to_string(tokens.shape()) + " " +
          dtype_name(tokens.dtype()));
  const int64_t T = tokens.size(1), offset = cache ? cache->len : 0;
  MIXPREC_CHECK(offset + T <= config_.max_seq_len, "Transformer::forward",
                "sequence length " + std::to_string(T) +
                    " exceeds model.max_seq_len = " + std::to_string(config_.max_seq_len));
  moe_stats_.clear();
  router_logits_.clear();
  aux_losses_.clear();
  z_losses_.clear();

  Tensor h;
  {
    amp::ModuleScope scope("tok_emb");
    h = embedding(tokens, weight("tok_emb.weight"));  // [B, T, d]
  }
  if (!rope_) {
    amp::ModuleScope scope("pos_emb");
    std::vector<int64_t> positions(static_cast<std::size_t>(T));
    for (int64_t t = 0; t < T; ++t) positions[static_cast<std::size_t>(t)] = offset + t;
    h = add(h, embedding(Tensor::from_vector(positions), weight("pos_emb.weight")));
  }
  // A checkpointed block (activation_checkpoint.h) as one function of its input: its MoE
  // losses leave through the checkpoint beside its output, so their gradients reach the
  // recompute. What block() records per forward is the forward's: a recompute's copies are
  // dropped (a new per-forward record belongs in `drop`).
  auto checkpointed = [this](const Tensor& x, int64_t l, BlockCheckpoint how) {
    auto fn = [this, l](const std::vector<Tensor>& in) {
      const std::size_t stats = moe_stats_.size(), logits = router_logits_.size(),
                        aux = aux_losses_.size(), z = z_losses_.size();
      std::vector<Tensor> out{block(in[0], l, nullptr)};
      for (std::size_t i = aux; i < aux_losses_.size(); ++i) out.push_back(aux_losses_[i]);
      for (std::size_t i = z; i < z_losses_.size(); ++i) out.push_back(z_losses_[i]);
      if (checkpoint_recomputing()) {
        auto drop = [](auto& records, std::size_t from) {
          records.erase(records.begin() + static_cast<std::ptrdiff_t>(from), records.end());
        };
        drop(moe_stats_, stats);
        drop(router_logits_, logits);
        drop(aux_losses_, aux);
        drop(z_losses_, z);
      }
      return out;
    };
    const std::size_t aux = aux_losses_.size(), z = z_losses_.size();
    const SavePolicy save =
        how == BlockCheckpoint::selective_ops ? save_attention_and_every_other_matmul : nullptr;
    const std::vector<Tensor> out = checkpoint(fn, {x}, {.save = save});
    std::size_t next = 1;
    for (std::size_t i = aux; i < aux_losses_.size(); ++i) aux_losses_[i] = out.at(next++);
    for (std::size_t i = z; i < z_losses_.size(); ++i) z_losses_[i] = out.at(next++);
    return out[0];
  };
  for (int64_t l = 0; l < config_.n_layers; ++l) {
    const std::string unit = block_unit(l);
    const BlockCheckpoint how = cache ? BlockCheckpoint::none : activation_checkpoint().block(l);
    const Tensor x = enter_unit(unit, h);
    h = leave_unit(unit,
                   how == BlockCheckpoint::none ? block(x, l, cache) : checkpointed(x, l, how));
  }
  h = norm(h, "", "final_norm");
  amp::ModuleScope scope("lm_head");
  const Tensor logits =
      linear(h, weight(config_.tie_embeddings ? "tok_emb.weight" : "lm_head.weight"));
  return leave_unit("root", logits);
}

LossParts Transformer::loss(const Tensor& tokens, const Tensor& targets) {
  MIXPREC_CHECK(targets.shape() == tokens.shape(), "Transformer::loss",
                "targets " + shape_to_string(targets.shape()) + " do not match tokens " +
                    shape_to_string(tokens.shape()));
  const Tensor logits = forward(tokens);
  const int64_t n = tokens.numel(), V = config_.vocab_size;
  LossParts p;
  p.ce = cross_entropy(logits.reshape({n, V}), targets.reshape({n}));
  const DType ld = p.ce.dtype();  // f32 (f64 for an f64 model)
  auto layer_mean = [&](const std::vector<Tensor>& parts) {
    if (parts.empty()) return Tensor::zeros({}, ld);
    Tensor s = parts[0];
    for (std::size_t i = 1; i < parts.size(); ++i) s = add(s, parts[i]);
    return scale(s, 1.0 / static_cast<double>(parts.size())).to(ld);
  };
  p.total = p.ce;
  if (arch_.experts) {
    const Tensor aux = layer_mean(aux_losses_), z = layer_mean(z_losses_);
    p.total = add(p.total, scale(aux, config_.moe.aux_loss_weight));
    p.total = add(p.total, scale(z, config_.moe.z_loss_weight));
    p.terms = {{"aux", aux}, {"z", z}};
  }
  return p;
}

}  // namespace mixprec::models
