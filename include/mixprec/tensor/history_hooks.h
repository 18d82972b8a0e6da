// How Tensor's own views, copies and casts take part in autograd without the tensor layer
// depending on it (tensor sits below autograd), the way PyTorch's core reaches autograd
// through hooks that autograd registers. autograd installs them the first time a tensor can
// carry history (set_requires_grad, set_history): before that no tensor requires grad and
// there is nothing to record.
#pragma once

namespace mixprec {

class Tensor;

namespace detail {

struct HistoryHooks {
  void (*record_view)(const Tensor& src, Tensor& view) = nullptr;
  void (*record_copy)(const Tensor& src, Tensor& copy) = nullptr;
  void (*record_cast)(const Tensor& src, Tensor& cast) = nullptr;
  bool (*grad_enabled)() = nullptr;
};

void install_history_hooks(const HistoryHooks& hooks);
// Null members until autograd installs them.
const HistoryHooks& history_hooks();

}  // namespace detail
}  // namespace mixprec
