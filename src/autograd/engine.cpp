// The reverse pass: discover the graph, count each node's consumers, then run nodes as their
// gradients become complete, latest-created first (a fixed order, so the same graph sums its
// gradients in the same order every time).
#include "mixprec/autograd/engine.h"

#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "mixprec/autograd/anomaly.h"
#include "mixprec/autograd/function.h"
#include "mixprec/backend/backend.h"

namespace mixprec {
namespace {

struct LaterFirst {
  bool operator()(const std::shared_ptr<Node>& a, const std::shared_ptr<Node>& b) const {
    return a->sequence_nr() < b->sequence_nr();
  }
};

// Number of edges into each node reachable from `root`.
std::unordered_map<Node*, int> count_dependencies(const std::shared_ptr<Node>& root) {
  std::unordered_map<Node*, int> deps;
  std::unordered_set<Node*> seen{root.get()};
  std::vector<Node*> stack{root.get()};
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const Edge& e : n->next_edges()) {
      if (!e.node) continue;
      ++deps[e.node.get()];
      if (seen.insert(e.node.get()).second) stack.push_back(e.node.get());
    }
  }
  return deps;
}

}  // namespace

void run_backward(const Tensor& root, const Tensor& grad, bool retain_graph) {
  MIXPREC_CHECK(root.defined(), "backward", "called on an undefined tensor");
  MIXPREC_CHECK(root.requires_grad(), "backward",
                "tensor of shape " + shape_to_string(root.shape()) +
                    " does not require grad and has no grad_fn");
  Tensor seed = grad;
  if (!seed.defined()) {
    MIXPREC_CHECK(root.numel() == 1, "backward",
                  "implicit gradient only for one-element tensors; got shape " +
                      shape_to_string(root.shape()) + " (pass a gradient)");
    seed = Tensor::ones(root.shape(), root.dtype());
  }
  MIXPREC_CHECK(seed.shape() == root.shape(), "backward",
                "gradient shape " + shape_to_string(seed.shape()) + " for a root of shape " +
                    shape_to_string(root.shape()));
  NoGradGuard no_grad;  // first-order only: backward records nothing

  const Edge root_edge = gradient_edge(root);
  std::unordered_map<Node*, int> deps = count_dependencies(root_edge.node);
  std::unordered_map<Node*, std::vector<Tensor>> buffers;
  auto add_grad = [&](const std::shared_ptr<Node>& node, int input_nr, Tensor g) {
    auto& buf = buffers[node.get()];
    if (buf.empty()) buf.resize(static_cast<size_t>(node->num_outputs()));
    Tensor& slot = buf.at(static_cast<size_t>(input_nr));
    if (!slot.defined()) {
      slot = std::move(g);
    } else if (slot.is_sole_owner() && slot.is_contiguous() && slot.shape() == g.shape()) {
      backend::current().accumulate_into(slot,
                                         g);  // nobody else sees it: add in place (the same bits)
    } else {
      // Out of place: a node may hand the same tensor to several inputs, or keep it.
      slot = backend::current().add_same_shape(slot, g);
    }
  };
  add_grad(root_edge.node, root_edge.input_nr, seed.detach());

  std::priority_queue<std::shared_ptr<Node>, std::vector<std::shared_ptr<Node>>, LaterFirst> ready;
  ready.push(root_edge.node);
  while (!ready.empty()) {
    std::shared_ptr<Node> node = ready.top();
    ready.pop();
    MIXPREC_CHECK(!node->released(), "backward",
                  std::string("the graph through ") + node->name() +
                      " was freed by an earlier backward; pass retain_graph=true to the first "
                      "call to run backward twice");
    std::vector<Tensor> grads = std::move(buffers[node.get()]);
    buffers.erase(node.get());
    bool any = false;
    for (const Tensor& g : grads) any = any || g.defined();
    std::vector<Tensor> input_grads;
    if (any) input_grads = node->apply(grads);
    if (anomaly_mode_enabled())
      for (size_t i = 0; i < input_grads.size(); ++i)
        note_if_nonfinite(input_grads[i], node->name(), true, static_cast<int>(i), node->module());
    grads.clear();
    if (!retain_graph && !node->reusable()) {
      node->release_saved();
      node->mark_released();
    }
    const auto& edges = node->next_edges();
    MIXPREC_CHECK(input_grads.empty() || input_grads.size() == edges.size(), "backward",
                  std::string(node->name()) + " returned " + std::to_string(input_grads.size()) +
                      " gradients for " + std::to_string(edges.size()) + " inputs");
    for (size_t i = 0; i < edges.size(); ++i) {
      const Edge& e = edges[i];
      if (!e.node) continue;
      if (i < input_grads.size() && input_grads[i].defined())
        add_grad(e.node, e.input_nr, std::move(input_grads[i]));
      if (--deps[e.node.get()] == 0) ready.push(e.node);
    }
  }
}

}  // namespace mixprec
