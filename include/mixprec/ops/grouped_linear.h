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

}  // namespace mixprec
