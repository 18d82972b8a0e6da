// The reverse pass. Nodes run in a deterministic order (ready node with the highest creation
// number first), gradients from several paths are summed, saved tensors are freed as soon as
// their node has run (unless retain_graph), and leaf gradients accumulate across calls.
#pragma once

#include "mixprec/tensor/tensor.h"

namespace mixprec {

// `grad` defaults to 1 for a one-element root; otherwise it must match the root's shape.
void run_backward(const Tensor& root, const Tensor& grad = {}, bool retain_graph = false);

}  // namespace mixprec
