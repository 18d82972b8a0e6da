// Token dispatch and combine for the mixture-of-experts layer (moe.cpp), as autograd nodes:
// one pass that copies each expert's token rows out of x, and one that sums the experts'
// gate-weighted outputs back per token, both in a fixed (expert) order so the bits never
// depend on the thread count. Private to src/models.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "mixprec/models/moe.h"

namespace mixprec::models::detail {

// Where each token's kept assignments went, in expert order: entries [start[t], start[t+1])
// are token t's (expert, row in that expert's batch, slot n·k + j).
struct TokenSlots {
  struct Entry {
    int64_t expert, row, slot;
  };
  std::vector<int64_t> start;  // [N + 1]
  std::vector<Entry> entries;  // [kept assignments]
};

// Token t's kept assignments, from a routing plan over n tokens.
TokenSlots token_slots(const RoutingPlan& plan, int64_t n);

// x [N, d] -> one [n_e, d] batch per expert (x's dtype): the rows of its tokens. Backward sums
// each token's row gradients in `acc` (f32, f64 for f64), rounded once into x's dtype.
std::vector<Tensor> dispatch_rows(const Tensor& x, const RoutingPlan& plan,
                                  const std::shared_ptr<const TokenSlots>& slots, DType acc);

// out[t] = Σ over t's kept assignments (expert order) of gates[slot] · ys[e][row], in `acc`;
// [n, d] in acc. Gradients flow to every ys[e] and to gates.
Tensor combine_rows(const std::vector<Tensor>& ys, const Tensor& gates, int64_t n, int64_t d,
                    const std::shared_ptr<const TokenSlots>& slots, DType acc);

}  // namespace mixprec::models::detail
