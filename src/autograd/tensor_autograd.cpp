// Tensor's autograd members: flags, .grad and the entry to the reverse pass. Declared
// with the rest of Tensor (tensor/tensor.h), defined here: they need autograd's types.
#include "install_history_hooks.h"
#include "mixprec/autograd/engine.h"
#include "mixprec/autograd/node.h"
#include "mixprec/tensor/tensor.h"

namespace mixprec {

std::shared_ptr<AutogradMeta>& Tensor::mutable_autograd_meta() {
  auto& meta = impl().autograd;
  if (!meta) meta = std::make_shared<AutogradMeta>();
  return meta;
}

bool Tensor::requires_grad() const {
  const AutogradMeta* meta = autograd_meta();
  return meta && meta->requires_grad;
}

Tensor& Tensor::set_requires_grad(bool enabled, DType grad_dtype) {
  MIXPREC_CHECK(is_leaf(), "Tensor::set_requires_grad",
                "only leaves can change requires_grad; use detach() to start a new leaf");
  MIXPREC_CHECK(is_floating(dtype()) && is_floating(grad_dtype), "Tensor::set_requires_grad",
                std::string("gradients need floating dtypes, got tensor ") + dtype_name(dtype()) +
                    " and grad " + dtype_name(grad_dtype));
  if (enabled) detail::ensure_history_hooks();
  auto& meta = mutable_autograd_meta();
  meta->requires_grad = enabled;
  meta->grad_dtype = grad_dtype;
  return *this;
}

bool Tensor::is_leaf() const {
  const AutogradMeta* meta = autograd_meta();
  return !meta || !meta->grad_fn;
}

Tensor Tensor::grad() const {
  const AutogradMeta* meta = autograd_meta();
  return meta ? meta->grad : Tensor();
}

void Tensor::set_grad(const Tensor& grad) {
  if (grad.defined())
    MIXPREC_CHECK(grad.shape() == shape(), "Tensor::set_grad",
                  "gradient shape " + shape_to_string(grad.shape()) + " for a tensor of shape " +
                      shape_to_string(shape()));
  mutable_autograd_meta()->grad = grad;
}

std::shared_ptr<Node> Tensor::grad_fn() const {
  const AutogradMeta* meta = autograd_meta();
  return meta ? meta->grad_fn : nullptr;
}

void Tensor::backward(const Tensor& grad, bool retain_graph) const {
  run_backward(*this, grad, retain_graph);
}

}  // namespace mixprec
