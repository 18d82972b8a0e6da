// Wiring ops into the graph.
#include "mixprec/autograd/function.h"

#include "install_history_hooks.h"
#include "mixprec/autograd/anomaly.h"
#include "mixprec/backend/backend.h"

namespace mixprec {

bool any_requires_grad(std::initializer_list<const Tensor*> inputs) {
  if (!GradMode::is_enabled()) return false;
  for (const Tensor* t : inputs)
    if (t && t->defined() && t->requires_grad()) return true;
  return false;
}

bool any_requires_grad(const std::vector<Tensor>& inputs) {
  if (!GradMode::is_enabled()) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

Edge gradient_edge(const Tensor& t) {
  if (!t.defined() || !t.requires_grad()) return {};
  AutogradMeta* meta = t.autograd_meta();
  if (meta->grad_fn) return {meta->grad_fn, meta->output_nr};
  std::shared_ptr<Node> acc = meta->grad_accumulator.lock();
  if (!acc) {
    // The accumulator holds the leaf's meta (not the tensor), so no cycle is formed.
    acc =
        std::make_shared<AccumulateGrad>(const_cast<Tensor&>(t).mutable_autograd_meta(), t.shape());
    meta->grad_accumulator = acc;
  }
  return {acc, 0};
}

void connect(Node& node, const std::vector<Tensor>& inputs) {
  node.next_edges().clear();
  node.next_edges().reserve(inputs.size());
  for (const Tensor& t : inputs) node.next_edges().push_back(gradient_edge(t));
}

void set_history(Tensor& out, const std::shared_ptr<Node>& node, int output_nr) {
  detail::ensure_history_hooks();
  auto& meta = out.mutable_autograd_meta();
  meta->requires_grad = true;
  meta->grad_fn = node;
  meta->output_nr = output_nr;
  if (anomaly_mode_enabled()) {
    if (output_nr == 0) node->set_module(anomaly_module_path());
    note_if_nonfinite(out, node->name(), false, output_nr, node->module());
  }
}

Tensor sum_to_shape(const Tensor& grad, const Shape& shape) {
  if (grad.shape() == shape) return grad;
  return backend::current().reduce_to_shape(grad, shape, std::nullopt);
}

}  // namespace mixprec
