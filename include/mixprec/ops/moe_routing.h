// The mixture-of-experts layer's own ops: the routing plan (which expert processes which
// token assignments, with a capacity), the router's logits, and the dispatch of token rows to
// the experts and their gated combine, as differentiable ops. Dispatch and combine run in a
// fixed (expert) order, so the bits never depend on the thread count. models/transformer/moe.h
// builds the layer from them.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "mixprec/backend/kernel_types.h"
#include "mixprec/tensor/tensor.h"

namespace mixprec {

// Per-layer routing statistics for the trainer's metrics.
struct MoeLayerStats {
  std::vector<int64_t> routed;  // assignments per expert before dropping
  std::vector<int64_t> kept;    // tokens each expert processed
  int64_t dropped = 0;          // assignments dropped by capacity
  int64_t capacity = 0;         // per expert (N·k when there is no limit)
};

// Which (token, slot) assignments each expert processes, decided from the top-k indices.
struct RoutingPlan {
  std::vector<std::vector<int64_t>> tokens;  // per expert: token ids, in token order
  std::vector<std::vector<int64_t>> slots;   // per expert: n·k + j of each kept assignment
  MoeLayerStats stats;
};

// ceil(capacity_factor · tokens · top_k / n_experts); tokens · top_k when the factor is 0.
int64_t expert_capacity(int64_t tokens, int64_t top_k, int64_t n_experts, double capacity_factor);
// expert_ids [N, k] (i64) -> the plan; ids outside [0, n_experts) are errors.
RoutingPlan plan_routing(const Tensor& expert_ids, int64_t n_experts, double capacity_factor);

// Router logits x · wᵀ [N, E] from the operands the "moe_router" autocast hook gave (xr, wr).
// When the hook only widened a bf16/f16 x to f32 (exact), the GEMM reads x itself (widened
// inside the kernel: the same products and sums) and backward keeps it rather than an f32
// copy, half the bytes per MoE layer; dX and dW as linear's, dX rounded once into x's dtype.
// Otherwise linear(xr, wr).
Tensor router_logits(const Tensor& x, const Tensor& xr, const Tensor& wr);

// Where each token's kept assignments went (backend/kernel_types.h).
using TokenSlots = backend::TokenSlots;

// Token t's kept assignments, from a routing plan over n tokens.
TokenSlots token_slots(const RoutingPlan& plan, int64_t n);

// x [N, d] -> one [n_e, d] batch per expert (x's dtype): the rows of its tokens. Backward sums
// each token's row gradients in `acc` (f32, f64 for f64), rounded once into x's dtype.
std::vector<Tensor> moe_dispatch(const Tensor& x, const RoutingPlan& plan,
                                 const std::shared_ptr<const TokenSlots>& slots, DType acc);

// out[t] = Σ over t's kept assignments (expert order) of gates[slot] · ys[e][row], in `acc`;
// [n, d] in acc. Gradients flow to every ys[e] and to gates.
Tensor moe_combine(const std::vector<Tensor>& ys, const Tensor& gates, int64_t n, int64_t d,
                   const std::shared_ptr<const TokenSlots>& slots, DType acc);

}  // namespace mixprec
