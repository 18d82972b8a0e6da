// Activation bytes of a Transformer step (Model::estimate_activations), op by op (N = tokens, d =
// d_model, H = heads, q = H·Dh the queries' width (d unless model.head_dim says otherwise), kv =
// n_kv_heads·Dh, F = d_ff, V = vocab, E = experts, k = top_k, R = N·k routed rows (capped by
// capacity); c = compute dtype bytes, r = residual stream bytes (the wider of param and compute:
// the embedding keeps the weight's dtype, add promotes), a = accumulator bytes (f32, f64 for f64)).
//
// Saved per block (pre-norm; each norm runs in f32 under autocast but keeps its narrow input):
//   attn_norm   input (the residual) r·N·d + rstd a·N (LayerNorm: + mean a·N)
//   q/k/v in    the one cast copy the three projections share            c·N·d
//   qk_norm     q and k before their norms c·N·(q + kv) + rstd a·N·(H + n_kv_heads)
//   attention   q, k (after RoPE) and v, contiguous  c·N·q + 2c·N·kv
//               f32 output before rounding (narrow inputs) or the output  a·N·q
//               log-sum-exp per row and head                              a·N·H
//   wo in       the heads merged back (a copy of a transposed view)       c·N·q
//   mlp_norm    input r·N·d + statistics
//   dense MLP   shared input c·N·d; SwiGLU gate, up and hidden 3c·N·F (GELU: up, hidden 2c·N·F)
//   MoE         shared input c·N·d (router reads it too); router logits a·N·E (softmax and
//               log-softmax keep them, and the model keeps them after the step) + their
//               max/log-sum twice 4a·N; top-k ids 8·N·k, values and gates 2a·N·k, their sum
//               and the z-loss lse 2a·N; dispatched rows c·R·d; experts' hidden 3c·R·F (GELU
//               2c·R·F); experts' outputs c·R·d (the gated combine keeps them); shared
//               experts' hidden 3c·N·S·F (S = n_shared_experts); an MoE's first
//               n_dense_layers blocks are dense MLPs of width dense_d_ff
// With save_fp8_activations (and a recipe that allows it) the dense linears' inputs (q/k/v, wo,
// the MLP's shared input, w_down) are kept as their FP8 casts, N·width bytes plus 4 per block
// scale, one cast per input however many linears read it; under a grouped recipe so are the
// routed experts' (their dispatched rows R·d, w_down's input R·F). A linear recipe's backward adds
// the largest FP8 product's operands, their f32 widenings and its f32 result (fp8_transient). Root:
// final norm input r·N·d + statistics, LM head input c·N·d, logits c·N·V (cross-entropy keeps the
// narrow logits), its row max and log-sum 2a·N. Embedding and add save nothing (the embedding's ids
// are the batch). Checkpointed blocks (activation_checkpoint.h) keep their input r·N·d (and an MoE
// block the router logits a·N·E its forward recorded); selective "op" also keeps attention's output
// c·N·d, its unrounded f32 copy a·N·q (narrow inputs) and log-sum-exp a·N·H, and the outputs of the
// block's odd-numbered linears: wq c·N·q, wv c·N·kv, then (dense MLP) w_up c·N·F and, after
// SwiGLU's gate, w_down c·N·d. A checkpointed block's backward recomputes all of its saved
// bytes, so they are live again while it runs.
// Transients: the loss forward widens narrow logits to f32 (4·N·V); its backward holds the
// widened logits and their f32 gradient (8·N·V; 4·N·V when the logits are already f32). In a
// block's backward the largest set is the MoE combine's (f32 copies of the output gradient
// a·N·d, of the experts' outputs and their gradients 2a·R·d, the gradients rounded back c·R·d,
// plus the residual gradient r·N·d), or the dense MLP's (r·N·d + 2c·N·F), or attention's
// (r·N·d + 3c·N·q + 2c·N·kv: merged-heads gradient, its contiguous copy, dq, dk, dv; with
// qk_norm under autocast also dq and dk widened to f32 for the norms, a·N·(q + kv)).
#include "mixprec/models/transformer/transformer.h"

#include <algorithm>
#include <string>

#include "mixprec/amp/linear_recipe.h"
#include "mixprec/backend/quantized.h"
#include "mixprec/numerics/dtype.h"

namespace mixprec::models {
namespace {

using Bytes = std::size_t;

Bytes u(int64_t v) {
  return static_cast<Bytes>(v);
}

struct Sizes {
  Bytes c, r, a;
  int64_t N, d, H, F, V;
  int64_t q;   // width of the queries: H · Dh (d unless model.head_dim says otherwise)
  int64_t kv;  // width of k and v: n_kv_heads · Dh (q without grouped-query attention)
  int64_t kv_heads;
  bool qk_norm;
  bool moe;  // blocks from model.moe.n_dense_layers on have experts
  // The bytes the dense linears keep of their inputs: the compute dtype's, or with
  // save_fp8_activations their FP8 casts (1 byte an element and the block scales).
  Bytes qkv_in = 0, wo_in = 0, mlp_in = 0, down_in = 0;
  // Under a linear recipe, the largest FP8 backward product's working set (fp8_transient).
  Bytes fp8_product = 0;
  // With save_fp8_grouped_activations the routed experts keep their inputs (the dispatched
  // rows, w_down's input) cast by this spec (null: in the compute dtype).
  const backend::QuantSpec* experts_cast = nullptr;
};

// An input of [rows, width] kept as its FP8 cast by `spec`: 1 byte an element, 4 per scale.
Bytes fp8_cast_bytes(const backend::QuantSpec& spec, int64_t rows, int64_t width) {
  const Shape scales = backend::scale_shape(spec, rows, width);
  return u(rows * width) + 4 * u(scales[0] * scales[1]);
}

// What the routed experts keep of an input of R rows and `width` columns.
Bytes experts_input_bytes(const Sizes& s, Bytes R, int64_t width) {
  return s.experts_cast ? fp8_cast_bytes(*s.experts_cast, static_cast<int64_t>(R), width)
                        : s.c * R * u(width);
}

// An FP8 product's working set in backward for a linear of [out, in] over N tokens: the FP8
// operands and their f32 widenings for the GEMM (bf16 where the CPU multiplies bf16 natively:
// then less), and grad_input's f32 result before rounding: the larger of grad_weight's
// 5·N·(in + out) and grad_input's 5·N·out + 5·in·out + 4·N·in; a saved FP8 input cast again
// for grad_weight (`recast`) first widens to an f32 Xᵀ, 4·N·in more.
Bytes fp8_transient(int64_t n, int64_t in, int64_t out, bool recast) {
  const Bytes wgrad = 5 * u(n * (in + out)) + (recast ? 4 * u(n * in) : 0);
  const Bytes dgrad = 5 * u(n * out) + 5 * u(in * out) + 4 * u(n * in);
  return std::max(wgrad, dgrad);
}

// What the linears reading one input of [N, width] keep of it: the FP8 cast when all of them
// save it so (one cast shared), both when some do, else the compute dtype's copy.
Bytes linear_input_bytes(const amp::MixedPrecisionPolicy& p, const Sizes& s, int64_t width,
                         std::initializer_list<std::pair<const char*, int64_t>> readers) {
  const Bytes narrow = s.c * u(s.N * width);
  const amp::LinearRecipe* r = p.linear_recipe;
  if (!r || !p.save_fp8_activations || !amp::saves_fp8_input(*r)) return narrow;
  int converted = 0;
  for (const auto& [path, out] : readers)
    converted += amp::recipe_converts(*r, p.linear_skip, path, out, width) ? 1 : 0;
  if (converted == 0) return narrow;
  const Bytes fp8 = fp8_cast_bytes(r->output.a, s.N, width);
  return converted == static_cast<int>(readers.size()) ? fp8 : fp8 + narrow;
}

Bytes norm_saved(const Sizes& s, bool layernorm) {
  return s.r * u(s.N * s.d) + (layernorm ? 2 : 1) * s.a * u(s.N);
}

Bytes attention_saved(const Sizes& s, bool layernorm) {
  const Bytes nq = u(s.N * s.q), nkv = u(s.N * s.kv);
  const Bytes qk_norms = s.qk_norm ? s.c * (nq + nkv) + s.a * u(s.N * (s.H + s.kv_heads)) : 0;
  return norm_saved(s, layernorm) + s.qkv_in  // shared q/k/v input
         + qk_norms                           // the q/k norms' inputs and statistics
         + s.c * (nq + 2 * nkv)               // q, k, v
         + s.a * nq + s.a * u(s.N * s.H)      // f32 output, log-sum-exp
         + s.wo_in;                           // wo input
}

// Latent attention (model.mla; W = H·D with D = max(nope + rope, v) the padded head width): the
// shared input c·N·d; with q_lora_rank Rq, wq_a's output (q_norm's input) c·N·Rq, its rstd
// a·N and wq_b's cast input c·N·Rq; wkv_a's output (kv_norm's input is a view of it)
// c·N·(Rkv + rope), rstd a·N and wkv_b's cast input c·N·Rkv; q, k, v padded and contiguous
// 3c·N·W; the f32 output a·N·W, log-sum-exp a·N·H; wo's input c·N·H·v.
Bytes latent_attention_saved(const Sizes& s, const config::ModelConfig& m) {
  const config::MlaConfig& a = m.mla;
  const Bytes n = u(s.N), nw = u(s.N * s.q);
  const Bytes q_lora = a.q_lora_rank > 0 ? 2 * s.c * n * u(a.q_lora_rank) + s.a * n : 0;
  return norm_saved(s, false) + s.c * u(s.N * s.d) + q_lora +
         s.c * n * u(a.kv_lora_rank + a.qk_rope_head_dim) + s.a * n + s.c * n * u(a.kv_lora_rank) +
         3 * s.c * nw + s.a * nw + s.a * u(s.N * s.H) + s.c * n * u(s.H * a.v_head_dim);
}

int64_t ffn_hidden_tensors(const config::ModelConfig& m) {
  return m.mlp == "swiglu" ? 3 : 2;
}

int64_t routed_rows(const config::ModelConfig& m, int64_t tokens) {
  const int64_t cap = expert_capacity(tokens, m.moe.top_k, m.moe.n_experts, m.moe.capacity_factor);
  return std::min(tokens * m.moe.top_k, cap * m.moe.n_experts);
}

Bytes moe_router_saved(const Sizes& s, const config::ModelConfig& m) {
  const Bytes n = u(s.N), k = u(m.moe.top_k);
  return s.a * n * u(m.moe.n_experts)  // logits
         + 4 * s.a * n                 // softmax and log-softmax max / log-sum
         + 8 * n * k                   // top-k ids (i64)
         + 2 * s.a * n * k             // top-k values, gates
         + 2 * s.a * n;                // the values' sum, z-loss lse
}

// A dense block's MLP width: d_ff, or an MoE's first blocks' dense_d_ff.
int64_t dense_width(const Sizes& s, const config::ModelConfig& m) {
  return s.moe ? m.moe.dense_d_ff : m.d_ff;
}

Bytes mlp_saved(const Sizes& s, const config::ModelConfig& m, bool moe_block) {
  const bool layernorm = m.norm == "layernorm";
  const Bytes hidden = u(ffn_hidden_tensors(m));
  if (!moe_block)  // norm, shared input, the activation's inputs, w_down's input
    return norm_saved(s, layernorm) + s.mlp_in + (hidden - 1) * s.c * u(s.N * dense_width(s, m)) +
           s.down_in;
  const Bytes base = norm_saved(s, layernorm) + s.c * u(s.N * s.d);  // norm, shared input
  const Bytes R = u(routed_rows(m, s.N));
  return base + moe_router_saved(s, m) + experts_input_bytes(s, R, s.d)      // dispatched rows
         + s.c * R * u(s.d)                                                  // experts' outputs
         + (hidden - 1) * s.c * R * u(s.F) + experts_input_bytes(s, R, s.F)  // experts' hidden
         + hidden * s.c * u(s.N * m.moe.n_shared_experts * s.F);  // shared experts' hidden
}

// What a checkpointed block keeps from its forward to its backward.
Bytes checkpointed_saved(const Sizes& s, const config::ModelConfig& m, BlockCheckpoint how) {
  const Bytes nd = u(s.N * s.d);
  Bytes kept = s.r * nd;  // the input
  if (s.moe) kept += s.a * u(s.N) * u(m.moe.n_experts);
  if (how != BlockCheckpoint::selective_ops) return kept;
  const bool narrow = s.c < s.a;
  const Bytes nq = u(s.N * s.q);
  kept += s.c * nq + (narrow ? s.a * nq : 0) + s.a * u(s.N * s.H);  // attention
  kept += s.c * nq + s.c * u(s.N * s.kv);                           // wq, wv
  if (!s.moe) kept += s.c * u(s.N * s.F) + (m.mlp == "swiglu" ? s.c * nd : 0);
  return kept;
}

Bytes block_backward_transient(const Sizes& s, const config::ModelConfig& m) {
  const Bytes nd = u(s.N * s.d), nq = u(s.N * s.q), nkv = u(s.N * s.kv), residual_grad = s.r * nd;
  const bool narrow_norms = s.qk_norm && s.c < s.a;
  const Bytes attention =
      residual_grad + s.c * (3 * nq + 2 * nkv) + (narrow_norms ? s.a * (nq + nkv) : 0);
  Bytes mlp = residual_grad + 2 * s.c * u(s.N * dense_width(s, m));
  if (s.moe) {
    const Bytes rd = u(routed_rows(m, s.N) * s.d);
    const bool narrow = s.c < s.a;  // .to(acc) copies only when the dtype differs
    mlp = std::max(mlp, residual_grad + (s.r < s.a ? s.a * nd : 0) +
                            (narrow ? s.a * rd : 0)      // f32 copies
                            + s.a * rd                   // dy
                            + (narrow ? s.c * rd : 0));  // dy rounded
  }
  return std::max(attention, mlp) + s.fp8_product;
}

}  // namespace

ActivationEstimate Transformer::estimate_activations(const amp::MixedPrecisionPolicy& policy,
                                                     int64_t sequences, int64_t seq_len) const {
  const config::ModelConfig& m = config_;
  Sizes s;
  s.c = dtype_size(policy.compute_dtype);
  s.r = std::max(s.c, dtype_size(policy.param_dtype));
  s.a = policy.compute_dtype == DType::f64 ? 8 : 4;
  s.N = sequences * seq_len;
  s.d = m.d_model;
  s.H = m.n_heads;
  s.q = m.n_heads * m.head_size();
  s.kv = m.kv_heads() * m.head_size();
  s.kv_heads = m.kv_heads();
  if (arch_.latent_attention) {  // q, k and v enter SDPA padded to one width
    const config::MlaConfig& a = m.mla;
    s.q = s.kv = m.n_heads * std::max(a.qk_nope_head_dim + a.qk_rope_head_dim, a.v_head_dim);
    s.kv_heads = m.n_heads;
  }
  s.qk_norm = m.qk_norm;
  s.F = m.d_ff;
  s.V = m.vocab_size;
  s.moe = arch_.experts;
  const bool layernorm = m.norm == "layernorm";
  const Bytes n = u(s.N), nv = u(s.N * s.V);
  // Block 0's module paths stand for every block's (the filters are substrings of them).
  const int64_t dense_f = arch_.experts ? m.moe.dense_d_ff : m.d_ff;
  s.qkv_in = linear_input_bytes(
      policy, s, s.d,
      {{"blocks.0.attn.wq", s.q}, {"blocks.0.attn.wk", s.kv}, {"blocks.0.attn.wv", s.kv}});
  s.wo_in = linear_input_bytes(policy, s, s.q, {{"blocks.0.attn.wo", s.d}});
  s.mlp_in =
      m.mlp == "swiglu"
          ? linear_input_bytes(policy, s, s.d,
                               {{"blocks.0.mlp.w_gate", dense_f}, {"blocks.0.mlp.w_up", dense_f}})
          : linear_input_bytes(policy, s, s.d, {{"blocks.0.mlp.w_up", dense_f}});
  s.down_in = linear_input_bytes(policy, s, dense_f, {{"blocks.0.mlp.w_down", s.d}});
  if (const amp::LinearRecipe* r = policy.linear_recipe) {
    // The block's widest linears: the MLP's, or the attention's.
    const bool recast = policy.save_fp8_activations && amp::saves_fp8_input(*r) &&
                        !amp::input_cast_serves_grad_weight(*r);
    s.fp8_product =
        std::max({fp8_transient(s.N, s.d, dense_f, recast),
                  fp8_transient(s.N, dense_f, s.d, recast), fp8_transient(s.N, s.d, s.q, recast)});
  }

  // Expert 0 of block 0 stands for every routed expert (stacked weights: not "skip"'s modules).
  if (const amp::LinearRecipe* g = policy.grouped_recipe;
      g && arch_.experts && policy.save_fp8_grouped_activations && amp::saves_fp8_input(*g) &&
      m.moe.idle_experts != "skip" &&
      amp::grouped_recipe_converts(*g, policy.grouped_fqns, "blocks.0.moe.experts.0.w_gate", s.F,
                                   s.d))
    s.experts_cast = &g->output.a;

  ActivationEstimate e;
  e.batch = 2 * 8 * n;
  e.blocks = m.n_layers;
  // An MoE's first n_dense_layers blocks are dense: block_saved is the mean over the blocks
  // (rounded up), so the total saved is exact.
  const int64_t dense = arch_.experts ? std::min(m.moe.n_dense_layers, m.n_layers) : m.n_layers;
  const Bytes attention =
      arch_.latent_attention ? latent_attention_saved(s, m) : attention_saved(s, layernorm);
  const Bytes all_blocks = u(m.n_layers) * attention + u(dense) * mlp_saved(s, m, false) +
                           u(m.n_layers - dense) * mlp_saved(s, m, true);
  e.block_saved = (all_blocks + u(m.n_layers) - 1) / u(m.n_layers);
  const ActivationCheckpoint& ac = activation_checkpoint();
  e.checkpoint_every = ac.every();
  if (e.checkpoint_every > 0) e.checkpointed_saved = checkpointed_saved(s, m, ac.checkpointed());
  e.root_saved = norm_saved(s, layernorm) + s.c * u(s.N * s.d) + s.c * nv + 2 * s.a * n;
  e.kept_after_backward = u(m.n_layers - dense) * s.a * n * u(m.moe.n_experts);
  const bool narrow_logits = s.c < s.a;
  e.forward_transient = narrow_logits ? s.a * nv : 0;
  e.loss_backward_transient = (narrow_logits ? 2 : 1) * s.a * nv;
  e.block_backward_transient = block_backward_transient(s, m);
  e.vocab_grad_numel = s.V * s.d;
  e.tied_embeddings = m.tie_embeddings;
  return e;
}

}  // namespace mixprec::models
