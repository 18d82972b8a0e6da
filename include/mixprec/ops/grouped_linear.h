// Many independent linear layers at once (the experts of a mixture-of-experts layer):
//   ys[g] = linear(xs[g], weights[g], biases[g])   for every group g
// with linear's values, autocast and matmul-precision rules, and gradients; but each direction
// runs as one parallel pass in which every thread computes whole products (each operand
// packed once, no barrier between products), the groups spread over the threads by their
// work. On the AVX-512 / AMX GEMM the bits equal one linear per group; they never depend on
// the thread count.
#pragma once

#include <string>
#include <vector>

#include "mixprec/tensor/tensor.h"

namespace mixprec {

// biases: empty, or one per group (undefined: none). scopes: empty, or one amp::ModuleScope
// name per group ("experts.3") that the group's autocast rules are looked up under, as if
// its linear were called inside that scope.
std::vector<Tensor> grouped_linear(const std::vector<Tensor>& xs,
                                   const std::vector<Tensor>& weights,
                                   const std::vector<Tensor>& biases = {},
                                   const std::vector<std::string>& scopes = {});

// The same over one stacked weight, as an MoE layer stores its routed experts (torchtitan's
// w_gate [E, d_ff, d]): ys[g] = linear(xs[g], weight[g], bias[g]) for every group g, with
// weight [G, Out, In] and bias [G, Out] (undefined: none); xs.size() == G, every xs[g]
// [..., In] (a group may have 0 rows). scopes as above: each group's autocast rules (and
// so the dtype its slice of weight is cast to) are looked up under scopes[g].
// Values, autocast and matmul-precision rules are the vector overload's given the slices
// weight[g], bias[g], bit for bit: outputs, input gradients and each slice of the weight and
// bias gradients. Gradients: ONE [G, Out, In] tensor for weight (and one [G, Out] for bias),
// in the dtype the vector overload gives each group's (f32 for bf16/f16/f32 products, f64
// for f64), so every group takes the optimizer step; a group with 0 rows, or whose output
// gets no gradient, gets a zero slice. Each group's weight-gradient product writes its slice
// of that tensor in place.
std::vector<Tensor> grouped_linear(const std::vector<Tensor>& xs, const Tensor& weight,
                                   const Tensor& bias = {},
                                   const std::vector<std::string>& scopes = {});

}  // namespace mixprec
