// The position-wise MLP of a transformer block (and of each MoE expert):
//   swiglu: w_down · (silu(w_gate · x) * (w_up · x))   (LLaMA)
//   gelu:   w_down · gelu(w_up · x)                     (GPT-2, exact erf form)
// each linear with its bias when one is given (GPT-2 style; LLaMA has none).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "mixprec/tensor/tensor.h"

namespace mixprec::models {

// gelu: the exact erf form (PyTorch's F.gelu); gelu_tanh: its tanh approximation
// (F.gelu(approximate="tanh"), GPT-2's "gelu_new" in Hugging Face configs).
enum class MlpKind { swiglu, gelu, gelu_tanh };
MlpKind parse_mlp_kind(std::string_view name);  // "swiglu" | "gelu" | "gelu_tanh"

// One MLP's weights, or G MLPs' stacked along a first dimension (w_up [G, d_ff, d], biases
// [G, d_ff], ...: an MoE layer's routed experts; feed_forward_grouped only).
struct FeedForwardWeights {
  Tensor w_gate;                // [d_ff, d]; swiglu only (undefined for gelu)
  Tensor w_up;                  // [d_ff, d]
  Tensor w_down;                // [d, d_ff]
  Tensor b_gate, b_up, b_down;  // optional biases [d_ff], [d_ff], [d] (undefined: none)
  // The MLPs it holds: 1, or G when stacked.
  int64_t groups() const { return w_up.ndim() == 3 ? w_up.size(0) : 1; }
};

// x [..., d] -> [..., d]
Tensor feed_forward(const Tensor& x, const FeedForwardWeights& w, MlpKind kind);

// feed_forward(xs[g], W_g, kind) for every group g (an MoE layer's experts), its values and
// gradients, with the linears of all groups run as grouped products (grouped_linear: the gate
// and up projections of every group in one pass, the down projections in a second); the
// groups are ws's in order, one per plain weight set and G per stacked one (group i of it
// reads its slices [i]; its gradients are the stacked tensors', zero slices for groups with 0
// rows). The activation of group g runs inside ModuleScope(scopes[g]), as its linears'
// autocast does; xs and scopes hold one entry per group.
std::vector<Tensor> feed_forward_grouped(const std::vector<Tensor>& xs,
                                         const std::vector<FeedForwardWeights>& ws, MlpKind kind,
                                         const std::vector<std::string>& scopes);

}  // namespace mixprec::models
