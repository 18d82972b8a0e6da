// The autograd graph: every op that records history creates a Node whose apply() maps the
// gradients of its outputs to the gradients of its inputs. Edges point from a node to the
// nodes of its inputs; a leaf that requires grad is reached through its AccumulateGrad node.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mixprec/tensor/tensor.h"

namespace mixprec {

class Node;

struct Edge {
  std::shared_ptr<Node> node;  // null: this input needs no gradient
  int input_nr = 0;            // which output of `node` the input was
};

class Node {
 public:
  Node();
  virtual ~Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  // grads[i] is the gradient of output i (undefined when no path reached it: read as zero).
  // Returns one gradient per input, in the order of next_edges (undefined = zero / none).
  virtual std::vector<Tensor> apply(std::vector<Tensor>& grads) = 0;
  virtual const char* name() const = 0;
  // Drops saved tensors; called once the node has run unless the graph is retained.
  virtual void release_saved() {}

  int num_outputs() const { return num_outputs_; }
  uint64_t sequence_nr() const { return sequence_nr_; }
  std::vector<Edge>& next_edges() { return next_edges_; }
  bool released() const { return released_; }
  void mark_released() { released_ = true; }
  // Reusable nodes (leaf accumulators) serve every graph their leaf takes part in.
  bool reusable() const { return reusable_; }
  // The module the op ran in, kept only in anomaly mode (for its backward's record).
  const std::string& module() const { return module_; }
  void set_module(std::string module) { module_ = std::move(module); }

 protected:
  int num_outputs_ = 1;
  bool reusable_ = false;

 private:
  std::vector<Edge> next_edges_;
  uint64_t sequence_nr_;  // creation order: later nodes run first in backward
  bool released_ = false;
  std::string module_;
};

// Autograd state of one tensor.
struct AutogradMeta {
  bool requires_grad = false;
  DType grad_dtype = DType::f32;  // dtype leaf gradients accumulate in
  Tensor grad;                    // leaves: the accumulated gradient
  std::shared_ptr<Node> grad_fn;  // non-leaves: the node that made this tensor
  int output_nr = 0;
  std::weak_ptr<Node> grad_accumulator;  // leaves: shared by every use of the leaf
};

// Adds `grad` into the leaf's .grad (converted to its grad_dtype).
class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(std::shared_ptr<AutogradMeta> leaf, Shape shape);
  std::vector<Tensor> apply(std::vector<Tensor>& grads) override;
  const char* name() const override { return "AccumulateGrad"; }

 private:
  std::shared_ptr<AutogradMeta> leaf_;
  Shape shape_;
};

}  // namespace mixprec
