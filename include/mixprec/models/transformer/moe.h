// A mixture-of-experts feed-forward layer (Switch / Mixtral style), as a function of its
// weights so tests can drive it with f64 tensors.
//
//   logits = x · routerᵀ            f32 (the "moe_router" autocast hook, then autocast off)
//   probs  = softmax(logits)        f32
//   top-k experts per token; gates = the top-k probabilities renormalised to sum to 1
//   (Mixtral); out[n] = Σ_j gate[n, j] · expert_{e(n, j)}(x[n])
//
// Dispatch is sparse (ops/moe_routing.h): per expert, gather its tokens, run its MLP on them (one
// GEMM each), scale by the gates and index_add the rows back (f32 accumulation, one rounding into
// x's dtype at the end). With a capacity, assignments beyond an expert's capacity are dropped in
// token order (token 0's slots first, top-1 before top-2 within a token); a dropped
// assignment contributes nothing and the other gates are not renormalised: the residual
// connection carries the token.
//
// Losses (f32, f64 for f64 inputs):
//   aux (Switch load balancing) = n_experts · Σ_e f_e · P_e, f_e = the fraction of the N·k
//     (token, slot) assignments routed to e before dropping (a constant), P_e = mean over
//     tokens of probs[:, e]; 1 for perfectly balanced routing, larger when routing piles onto
//     experts the router also favours (at most n_experts). Its gradient flows through P only.
//   z (ST-MoE router z-loss) = mean over tokens of logsumexp(logits)².
#pragma once

#include <cstdint>
#include <vector>

#include "mixprec/models/transformer/feed_forward.h"
#include "mixprec/ops/moe_routing.h"
#include "mixprec/tensor/tensor.h"

namespace mixprec::models {

struct MoeWeights {
  Tensor router;                            // [n_experts, d]
  std::vector<FeedForwardWeights> experts;  // n_experts
};

struct MoeOptions {
  int64_t top_k = 2;
  double capacity_factor = 0.0;  // 0: no capacity, nothing dropped
  MlpKind mlp = MlpKind::swiglu;
};

struct MoeOutput {
  Tensor out;            // [N, d], x's dtype
  Tensor router_logits;  // [N, n_experts], f32 (f64 for f64 x)
  Tensor probs;          // softmax(router_logits)
  Tensor aux_loss;       // scalar
  Tensor z_loss;         // scalar
  MoeLayerStats stats;
};

// x [N, d] -> MoeOutput. Runs inside the caller's ModuleScope; the router runs in a nested
// "router" scope.
MoeOutput moe_forward(const Tensor& x, const MoeWeights& weights, const MoeOptions& options);

}  // namespace mixprec::models
