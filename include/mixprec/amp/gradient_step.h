// What the loss scaler and the numerics monitor see of an optimizer: the gradients its update
// reads, each named by its parameter, and the update itself. optim::Optimizer implements it,
// so amp needs nothing else of optim (amp is the lower layer: README, "Layout").
#pragma once

#include <string_view>
#include <vector>

#include "mixprec/tensor/tensor.h"

namespace mixprec::amp {

struct NamedGradient {
  std::string_view name;  // the parameter's; valid while the optimizer's parameters live
  Tensor grad;            // defined; as stored (may be a strided view)
};

class GradientStep {
 public:
  virtual ~GradientStep() = default;
  // Every defined gradient, in parameter order.
  virtual std::vector<NamedGradient> gradients() const = 0;
  // Makes `grad` the gradient of the parameter named `name` (the scaler unscales a strided
  // gradient into a dense copy, which then takes its place, as PyTorch's does).
  virtual void replace_gradient(std::string_view name, Tensor grad) = 0;
  // One update from the gradients, each element multiplied by inv_scale as it is read.
  virtual void step(float inv_scale) = 0;
};

}  // namespace mixprec::amp
