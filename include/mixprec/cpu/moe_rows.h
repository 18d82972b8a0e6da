// The mixture-of-experts row kernels (backend.h: moe_*): token rows copied to their experts'
// batches, and the gated combine back, each with its backward. Work is split by token (or
// expert row), and every token sums its rows in expert order, so the bits never depend on
// the thread count.
#pragma once

#include <cstdint>
#include <vector>

#include "mixprec/backend/kernel_types.h"

namespace mixprec::cpu {

std::vector<Tensor> moe_dispatch(const Tensor& x, const std::vector<std::vector<int64_t>>& tokens);
Tensor moe_dispatch_backward(const std::vector<Tensor>& grads, const backend::TokenSlots& slots,
                             int64_t n, int64_t d, DType acc);
Tensor moe_combine(const std::vector<Tensor>& ys, const Tensor& gates,
                   const backend::TokenSlots& slots, int64_t n, int64_t d);
backend::MoeCombineGrads moe_combine_backward(const Tensor& gout, const std::vector<Tensor>& ys,
                                              const Tensor& gates,
                                              const backend::TokenSlots& slots);

}  // namespace mixprec::cpu
