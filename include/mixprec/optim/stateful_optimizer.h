// What SGD, AdamW and Adam-mini share: per-parameter state (a step count and named buffers
// in the master dtype, plus a Kahan compensation buffer under a Kahan pure low-precision
// policy), allocated on a parameter's first update as in PyTorch, and its state_dict form.
//
// State dict keys: "step" (the optimizer's step count), and for each parameter with state
// "<name>.step" and "<name>.<buffer>" (e.g. "fc.weight.exp_avg"), "<name>.kahan_comp". Steps
// are 0-d f64 tensors; buffers keep their stored dtype, so a round trip is bit-exact.
//
// Narrow masters (policy.f32_master == false with a bf16/f16 param dtype) keep their state in
// that dtype too. Every update is computed in f32 and written back according to
// policy.master_update:
//   nearest     round to nearest even (master and state);
//   stochastic  master and state rounded stochastically: element i of buffer b of parameter
//               `name` at step t draws Philox4x32-10 keyed by `seed` at counter
//               (i, stream(name, t, b)) (numerics/rounding.h), so a run is reproducible and
//               independent of the thread count;
//   kahan       master: compensated summation with a bf16/f16 buffer c per parameter, state
//               to nearest even. With p_new the f32 result of the update rule:
//                 y = (p_new - p) - c;  t = round_nearest(p + y);  c = round_nearest((t - p) - y);
//                 p = t
//               (every operation in f32). c holds what the last rounding added beyond the
//               intended update, so it is taken back from the next one.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "mixprec/optim/optimizer.h"

namespace mixprec::optim {

struct BufferSpec {
  std::string name;  // key suffix in the state dict
  Shape shape;
  bool nonnegative = false;  // a second moment: a loaded value below 0 is damage
};

class StatefulOptimizer : public Optimizer {
 public:
  // One update of every parameter with a gradient. Gradients may be f32, bf16 or f16.
  void step(float inv_scale = 1.0f) final;

  std::size_t state_bytes() const final;
  StateDict state_dict() const final;
  void load_state_dict(const StateDict& state) final;

  uint64_t seed() const { return seed_; }

 protected:
  struct ParamState {
    int64_t step = 0;             // updates this parameter has had
    std::vector<Tensor> buffers;  // as buffer_specs() lists them
    Tensor kahan;                 // defined under a Kahan narrow-master policy
  };

  StatefulOptimizer(std::vector<ParamGroup> groups, uint64_t seed, const char* where);

  // The buffers a parameter needs (empty: none), zero-initialised on its first update.
  virtual std::vector<BufferSpec> buffer_specs(const Parameter& param) const = 0;
  // Runs once per step before any update, with every parameter that has a gradient and its
  // checked gradient (in the same order): for work that spans parameters (Adam-mini's blocks
  // cut by a shard boundary). Default: nothing.
  virtual void before_updates(const ParamList& params, const std::vector<Tensor>& grads,
                              float inv_scale) {
    (void)params, (void)grads, (void)inv_scale;
  }
  // Applies the rule to one parameter; state.step already counts this update.
  virtual void update(Parameter& param, const ParamGroup& group, ParamState& state,
                      const Tensor& grad, float inv_scale) = 0;
  // The name of the optimizer for error messages ("AdamW", ...).
  const char* where() const { return where_; }

 private:
  ParamState& state_for(Parameter& param);
  ParamState make_state(const Parameter& param) const;

  uint64_t seed_;
  const char* where_;
  std::unordered_map<const Parameter*, ParamState> state_;
};

}  // namespace mixprec::optim
