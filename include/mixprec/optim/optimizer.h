// The optimizer interface every update rule implements, and the contract the loss scaler
// relies on. An optimizer owns parameter groups; step() updates each parameter that has a
// gradient from grad * inv_scale (the scaler's 1/scale when it did not unscale in place), in
// one fused pass per parameter (unscale, weight decay, moments, master update, working-copy
// refresh), and never reads a gradient when the step is skipped. It does not check gradients
// for non-finite values: GradScaler::step does that first, and skips.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "mixprec/amp/gradient_step.h"
#include "mixprec/optim/parameter.h"
#include "mixprec/tensor/tensor_map.h"

namespace mixprec::optim {

struct ParamGroup {
  ParamList params;
  double lr = 1e-3;
  double weight_decay = 0.0;  // see weight_decay_of
  // torchtitan's convention: weight decay on every parameter, norm gains and biases too.
  // false: nanoGPT's (and Hugging Face Trainer's): not on parameters whose role says
  // no_weight_decay (the model's norm gains and biases).
  bool decay_every_parameter = false;
};

// The weight decay `param` of `group` takes (the one rule every optimizer reads).
double weight_decay_of(const ParamGroup& group, const Parameter& param);

// Named tensors of an optimizer's state ("<param name>.exp_avg", ..., plus scalars such as
// "step" as 0-d f64 tensors), as saved in a checkpoint.
using StateDict = TensorMap;

class Optimizer : public amp::GradientStep {
 public:
  // One update of every parameter with a gradient (parameters without one are left alone,
  // as in PyTorch). inv_scale multiplies each gradient element as it is read.
  void step(float inv_scale = 1.0f) override = 0;
  // Every defined gradient with its parameter's name (what the loss scaler reads).
  std::vector<amp::NamedGradient> gradients() const override;
  void replace_gradient(std::string_view name, Tensor grad) override;
  // Drops every gradient.
  void zero_grad();

  std::vector<ParamGroup>& groups() { return groups_; }
  const std::vector<ParamGroup>& groups() const { return groups_; }
  // Every parameter, group by group, in order.
  ParamList parameters() const;
  int64_t steps() const { return steps_; }
  // Sets every group's lr (what a schedule does each step: lr_schedule.h).
  void set_lr(double lr);

  // Bytes of optimizer state currently held (moments, compensation buffers).
  virtual std::size_t state_bytes() const = 0;
  virtual StateDict state_dict() const = 0;
  // Throws mixprec::Error naming the missing or mis-shaped entry; nothing changes then.
  virtual void load_state_dict(const StateDict& state) = 0;

 protected:
  explicit Optimizer(std::vector<ParamGroup> groups) : groups_(std::move(groups)) {}
  std::vector<ParamGroup> groups_;
  int64_t steps_ = 0;  // incremented by step()
};

}  // namespace mixprec::optim
