// SGD with momentum, dampening, Nesterov and L2 weight decay: torch.optim.SGD's rule, computed
// in f32 on the master:
//   d = g + wd * p;  b = d (first update) else momentum * b + (1 - dampening) * d;
//   d = nesterov ? d + momentum * b : b;  p = p - lr * d
// g is the gradient times inv_scale; wd is the group's weight_decay (0 for no_weight_decay
// parameters). State: "momentum_buffer" (when momentum != 0).
#pragma once

#include <cstdint>
#include <vector>

#include "mixprec/optim/stateful_optimizer.h"

namespace mixprec::optim {

struct SgdOptions {
  double momentum = 0.0;
  double dampening = 0.0;
  bool nesterov = false;  // needs momentum > 0 and dampening == 0, as in PyTorch
  uint64_t seed = 0;      // stochastic rounding of narrow masters
};

class SGD : public StatefulOptimizer {
 public:
  explicit SGD(std::vector<ParamGroup> groups, SgdOptions options = {});
  SGD(ParamList params, double lr, double weight_decay = 0.0, SgdOptions options = {});

  const SgdOptions& options() const { return options_; }

 protected:
  std::vector<BufferSpec> buffer_specs(const Parameter& param) const override;
  void update(Parameter& param, const ParamGroup& group, ParamState& state, const Tensor& grad,
              float inv_scale) override;

 private:
  SgdOptions options_;
};

}  // namespace mixprec::optim
