// What an op needs to record itself in the graph:
//   Tensor y = compute(...);                       // under NoGradGuard or on detached inputs
//   if (any_requires_grad({x, w})) {
//     auto node = std::make_shared<MyBackward>(...);   // saves detached tensors it needs
//     connect(node, {x, w});                            // one edge per input
//     set_history(y, node);                             // y.grad_fn() == node
//   }
#pragma once

#include <initializer_list>
#include <memory>
#include <vector>

#include "mixprec/autograd/grad_mode.h"
#include "mixprec/autograd/node.h"

namespace mixprec {

// True when grad mode is on and some defined input requires grad.
bool any_requires_grad(std::initializer_list<const Tensor*> inputs);
bool any_requires_grad(const std::vector<Tensor>& inputs);
inline bool any_requires_grad(std::initializer_list<Tensor> inputs) {
  return any_requires_grad(std::vector<Tensor>(inputs));
}

// The edge a gradient for `t` flows along (null node when t needs no gradient).
Edge gradient_edge(const Tensor& t);
// Sets node's next edges to the gradient edges of `inputs` (undefined inputs get null edges).
void connect(Node& node, const std::vector<Tensor>& inputs);
// Marks `out` as output `output_nr` of `node`.
void set_history(Tensor& out, const std::shared_ptr<Node>& node, int output_nr = 0);

// Reduces a broadcast gradient back to `shape` by summing over broadcast dims (f32 accumulate).
Tensor sum_to_shape(const Tensor& grad, const Shape& shape);

}  // namespace mixprec
