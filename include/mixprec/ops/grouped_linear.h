// Many independent linear layers at once (the experts of a mixture-of-experts layer):
//   ys[g] = linear(xs[g], W_g, b_g)   for every group g
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

// Where groups take their weights from: a 2-d weight [Out, In] (bias [Out]) is one group's; a
// 3-d one [G, Out, In] (bias [G, Out]) stacks G groups' (torchtitan's routed experts,
// w_gate [E, d_ff, d]), group i reading weight[i] and bias[i]. An undefined bias: none.
struct GroupedWeight {
  Tensor weight;
  Tensor bias;
};

// The groups are the sources' groups in order (source 0's, then source 1's, ...), so
// xs.size() is the sum over the sources of their group counts; every xs[g] is [..., In] of
// its source (a group may have 0 rows). scopes: empty, or one amp::ModuleScope name per group
// ("experts.3") that the group's autocast rules (so the dtype its weight, or slice, is cast
// to) are looked up under, as if its linear were called inside that scope.
//
// Values, autocast and matmul-precision rules, and bits are those of one linear per group
// given its weight (slice) and bias (slice): outputs, input gradients and weight and bias
// gradients. Gradients reach each source tensor once:
//   2-d source: its group's gradient, as linear gives it (a gradient of zeros when the group
//     has 0 rows; none when its output gets no gradient);
//   3-d source: ONE [G, Out, In] gradient (one [G, Out] for its bias) in the dtype linear
//     gives each group's (f32 for bf16/f16/f32 products, f64 for f64), each group's
//     weight-gradient product writing its slice in place; a group with 0 rows, or whose
//     output gets no gradient, gets a zero slice, so every group of the stack takes the
//     optimizer step.
// One backward node for the call, with an edge per group input and per source tensor (per
// autocast cast of a 3-d one: groups in fp32 modules read the f32 master, the rest one bf16
// cast, each made once).
std::vector<Tensor> grouped_linear(const std::vector<Tensor>& xs,
                                   const std::vector<GroupedWeight>& sources,
                                   const std::vector<std::string>& scopes = {});

// One 2-d source per group: ys[g] = linear(xs[g], weights[g], biases[g]). biases: empty, or
// one per group (undefined: none).
std::vector<Tensor> grouped_linear(const std::vector<Tensor>& xs,
                                   const std::vector<Tensor>& weights,
                                   const std::vector<Tensor>& biases = {},
                                   const std::vector<std::string>& scopes = {});

// One 3-d source: ys[g] = linear(xs[g], weight[g], bias[g]) with weight [G, Out, In] and
// bias [G, Out] (undefined: none); xs.size() == G.
std::vector<Tensor> grouped_linear(const std::vector<Tensor>& xs, const Tensor& weight,
                                   const Tensor& bias = {},
                                   const std::vector<std::string>& scopes = {});

}  // namespace mixprec
