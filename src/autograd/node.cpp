#include "mixprec/autograd/node.h"

#include <atomic>

#include "mixprec/backend/backend.h"

namespace mixprec {
namespace {
std::atomic<uint64_t> next_sequence_nr{0};
}  // namespace

Node::Node() : sequence_nr_(next_sequence_nr.fetch_add(1, std::memory_order_relaxed)) {}

AccumulateGrad::AccumulateGrad(std::shared_ptr<AutogradMeta> leaf, Shape shape)
    : leaf_(std::move(leaf)), shape_(std::move(shape)) {
  reusable_ = true;
}

std::vector<Tensor> AccumulateGrad::apply(std::vector<Tensor>& grads) {
  const Tensor& g = grads.at(0);
  if (!g.defined()) return {};
  MIXPREC_CHECK(g.shape() == shape_, "backward",
                "gradient of shape " + shape_to_string(g.shape()) + " for a leaf of shape " +
                    shape_to_string(shape_));
  if (!leaf_->grad.defined()) {
    // The leaf must own its gradient (later accumulation writes into it in place): a fresh
    // gradient nobody else holds is taken as is, anything else is copied.
    const bool sole = g.is_sole_owner() && g.dtype() == leaf_->grad_dtype && g.is_contiguous();
    Tensor owned = sole ? g : g.dtype() == leaf_->grad_dtype ? g.clone() : g.to(leaf_->grad_dtype);
    leaf_->grad = owned.contiguous();
  } else {
    backend::current().accumulate_into(leaf_->grad, g);
  }
  return {};
}

}  // namespace mixprec
