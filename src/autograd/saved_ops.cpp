// Selective checkpointing's op hook (saved_ops.h) and the region it reads.
#include "mixprec/autograd/saved_ops.h"

#include "checkpoint_region.h"
#include "mixprec/core/error.h"

namespace mixprec {
namespace detail {
namespace {
thread_local CheckpointRegion* t_region = nullptr;
}  // namespace

CheckpointRegion* current_region() {
  return t_region;
}

RegionScope::RegionScope(CheckpointRegion& region) : outer_(t_region) {
  t_region = &region;
}

RegionScope::~RegionScope() {
  t_region = outer_;
}

}  // namespace detail

bool save_attention_and_every_other_matmul(std::string_view op, int64_t nth) {
  if (op == "scaled_dot_product_attention") return true;
  return op == "linear" && nth % 2 == 1;
}

SavedOp::SavedOp(const char* op) : op_(op) {
  detail::CheckpointRegion* r = detail::t_region;
  if (!r || !r->policy) return;
  const int64_t nth = ++r->calls[op];
  if (!r->policy(op, nth)) return;
  if (!r->recompute) {
    picked_ = true;
    return;
  }
  // The recompute calls the same ops in the same order as the forward (same inputs, same
  // code): anything else is a function that is not a function of its inputs.
  const bool in_order = r->next < r->kept->size() && (*r->kept)[r->next].op == op;
  MIXPREC_CHECK(in_order, "checkpoint",
                std::string("the recompute reached call ") + std::to_string(nth) + " of " + op +
                    ", which its forward did not keep in this order: the checkpointed function "
                    "must run the same ops on every call");
  recalled_ = &(*r->kept)[r->next++].outputs;
}

Tensor SavedOp::output(std::size_t i) const {
  MIXPREC_CHECK(recalled_ && i < recalled_->size(), "checkpoint",
                std::string("no kept output ") + std::to_string(i) + " for " + op_);
  const Tensor& t = (*recalled_)[i];
  return t.defined() ? t.detach() : t;
}

void SavedOp::keep(std::vector<Tensor> outputs) const {
  if (!picked_) return;
  for (Tensor& t : outputs)
    if (t.defined()) t = t.detach();
  detail::t_region->kept->push_back({op_, std::move(outputs)});
}

}  // namespace mixprec
