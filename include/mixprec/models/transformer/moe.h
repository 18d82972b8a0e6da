// A mixture-of-experts feed-forward layer (Switch / Mixtral, and DeepSeek-V3's routing as
// torchtitan's deepseek_v3 MoE has it), as a function of its weights so tests can drive it
// with f64 tensors. The router runs in f32 (the "moe_router" autocast hook, then autocast off):
//
//   logits = x · routerᵀ
//   scores = softmax(logits) or sigmoid(logits)
//   choice = scores + expert_bias (when given; it only picks experts, no gradient reaches it)
//   with groups: a group ranks by the sum of its two best choice scores; a token keeps its
//     n_limited_groups best groups, the others' experts are out of its choice
//   top-k experts per token by choice (ties to the lower index); gates = their unbiased
//   scores, / their sum when route_norm (Mixtral's renormalisation), × route_scale
//   out[n] = Σ_j gate[n, j] · expert_{e(n, j)}(x[n])  (+ shared(x[n]) when there are shared
//   experts: always on, ungated)
//
// Dispatch is sparse (ops/moe_routing.h): per expert, gather its tokens, run its MLP on them (one
// GEMM each), scale by the gates and index_add the rows back (f32 accumulation, one rounding into
// x's dtype at the end). Per-expert weights: an expert without tokens runs nothing and its
// weights get no gradient. Stacked weights: every expert runs, an idle one on its 0 rows, so
// its slice of each stacked gradient is zero (and the optimizer steps it). With a capacity,
// assignments beyond an expert's capacity are dropped in token order (token 0's slots first, top-1
// before top-2 within a token); a dropped assignment contributes nothing and the other gates are
// not renormalised: the residual connection carries the token.
//
// Losses (f32, f64 for f64 inputs):
//   aux (Switch load balancing; DeepSeek's balance loss) = n_experts · Σ_e f_e · P_e, f_e = the
//     fraction of the N·k (token, slot) assignments routed to e before dropping (a constant),
//     P_e = mean over tokens of e's score normalised over the experts (the softmax itself; for
//     sigmoid scores / their sum); 1 for perfectly balanced routing, larger when routing piles
//     onto experts the router also favours (at most n_experts). Its gradient flows through P
//     only. With `global_counts`, f_e counts the assignments of every rank's rows (the
//     callback sums the counts over ranks): the data-parallel mean of the ranks' gradients is
//     then the gradient of the whole batch's loss.
//   z (ST-MoE router z-loss) = mean over tokens of logsumexp(logits)².
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "mixprec/models/transformer/feed_forward.h"
#include "mixprec/ops/moe_routing.h"
#include "mixprec/tensor/tensor.h"

namespace mixprec::models {

// The routed experts come one FeedForwardWeights per expert (`experts`), or stacked: `stacked`
// with w_gate / w_up [n_experts, d_ff, d], w_down [n_experts, d, d_ff] and biases [n_experts,
// d_ff] / [n_experts, d] (when `experts` is empty; torchtitan's layout).
struct MoeWeights {
  Tensor router;                            // [n_experts, d]
  std::vector<FeedForwardWeights> experts;  // n_experts, or none when stacked
  FeedForwardWeights stacked;               // every routed expert's weights, stacked
  FeedForwardWeights shared;                // the shared experts' MLP (undefined w_up: none)
  Tensor expert_bias;                       // [n_experts] f32 (undefined: none)
  int64_t n_experts() const {
    return experts.empty() && stacked.w_up.defined() ? stacked.w_up.size(0)
                                                     : static_cast<int64_t>(experts.size());
  }
};

enum class ScoreFunc { softmax, sigmoid };
ScoreFunc parse_score_func(const std::string& name);  // "softmax" | "sigmoid"

struct MoeOptions {
  int64_t top_k = 2;
  double capacity_factor = 0.0;  // 0: no capacity, nothing dropped
  MlpKind mlp = MlpKind::swiglu;
  ScoreFunc score_func = ScoreFunc::softmax;
  bool route_norm = true;
  double route_scale = 1.0;
  int64_t n_groups = 0;  // 0: no group-limited routing
  int64_t n_limited_groups = 0;
  // Sums the per-expert routed counts over the data-parallel ranks, in place (null: this
  // rank's rows only).
  std::function<void(std::vector<int64_t>&)> global_counts = nullptr;
};

struct MoeOutput {
  Tensor out;            // [N, d], x's dtype
  Tensor router_logits;  // [N, n_experts], f32 (f64 for f64 x)
  Tensor probs;          // the scores normalised over the experts (P of the aux loss)
  Tensor aux_loss;       // scalar
  Tensor z_loss;         // scalar
  MoeLayerStats stats;   // this rank's rows
};

// x [N, d] -> MoeOutput. Runs inside the caller's ModuleScope; the router runs in a nested
// "router" scope.
MoeOutput moe_forward(const Tensor& x, const MoeWeights& weights, const MoeOptions& options);

}  // namespace mixprec::models
