// AdamW (Loshchilov & Hutter): torch.optim.AdamW's rule (amsgrad off), computed in f32 on the
// master in one fused pass per parameter:
//   m = b1 * m + (1 - b1) * g;   v = b2 * v + (1 - b2) * g * g
//   p = p * (1 - lr * wd) - (lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
// g is the gradient times inv_scale, t the parameter's update count, wd the group's
// weight_decay (0 for no_weight_decay parameters); scalars are formed in f64 and rounded to
// f32 as PyTorch does. State: "exp_avg" (m) and "exp_avg_sq" (v), 8 bytes per parameter with
// an f32 master (4 in the pure bf16 modes, plus 2 for Kahan's compensation).
#pragma once

#include <cstdint>
#include <vector>

#include "mixprec/optim/stateful_optimizer.h"

namespace mixprec::optim {

struct AdamWOptions {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  uint64_t seed = 0;  // stochastic rounding of narrow masters
};

class AdamW : public StatefulOptimizer {
 public:
  explicit AdamW(std::vector<ParamGroup> groups, AdamWOptions options = {});
  // One group; PyTorch's default weight decay.
  AdamW(ParamList params, double lr, double weight_decay = 0.01, AdamWOptions options = {});

  const AdamWOptions& options() const { return options_; }

 protected:
  std::vector<BufferSpec> buffer_specs(const Parameter& param) const override;
  void update(Parameter& param, const ParamGroup& group, ParamState& state, const Tensor& grad,
              float inv_scale) override;

 private:
  AdamWOptions options_;
};

// Checks betas in [0, 1) and eps >= 0 (shared by the Adam family).
void check_adam_options(double beta1, double beta2, double eps, const char* where);

}  // namespace mixprec::optim
