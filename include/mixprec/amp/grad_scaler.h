// Loss scaling with PyTorch GradScaler semantics (torch.amp.GradScaler), plus the options
// other frameworks have (DeepSpeed's hysteresis, minimum and maximum scale), for gradients of
// any dtype: bf16 and f16 gradients are unscaled and checked like f32 ones, never an error.
//
//   GradScaler scaler(ScalerOptions::dynamic());
//   scaler.scale(loss).backward();
//   scaler.unscale(opt);                    // optional: before clipping
//   clip_grad_norm(opt.parameters(), 1.0);
//   StepReport r = scaler.step(opt);        // skipped (with the reason) on inf/NaN
//   scaler.update();
//
// A disabled scaler (the bf16 default) keeps the scale at 1 but still checks: a non-finite
// gradient skips the step, so a bf16 inf never reaches the optimizer state. Several
// optimizers and losses may share one scaler; update() backs off when any optimizer saw a
// non-finite gradient since the last update().
#pragma once

#include <cfloat>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "mixprec/amp/gradient_step.h"
#include "mixprec/amp/policy.h"
#include "mixprec/tensor/tensor_map.h"

namespace mixprec::amp {

struct ScalerOptions {
  bool enabled = true;  // false: scale fixed at 1 (the non-finite check stays on)
  bool dynamic = true;  // false: a static scale (init_scale, never changed)
  double init_scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;  // consecutive finite steps before growing
  // Overflows tolerated before backing off (DeepSpeed's hysteresis; 1 = back off at once, as
  // PyTorch). Each overflow still skips its step; growth restores the allowance.
  int64_t hysteresis = 1;
  double min_scale = 0.0;      // backoff never goes below (0: no floor)
  double max_scale = FLT_MAX;  // growth never goes above (and never past FLT_MAX)
  // PyTorch's step() unscales .grad in place first when unscale() was not called. mixprec's
  // default (false) folds 1/scale into the optimizer's pass instead, one pass over the
  // gradients fewer, and leaves .grad scaled.
  bool unscale_in_step = false;
  // PyTorch's unscale_() raises "Attempting to unscale FP16 gradients."; mixprec's default
  // unscales them (what falls below f16's range after the division flushes to 0).
  bool allow_fp16_grads = true;

  static ScalerOptions none();  // disabled: checks only
  static ScalerOptions fixed(double scale);
  static ScalerOptions dynamic_defaults();  // PyTorch's defaults for the scale
  // dynamic_defaults() with PyTorch's conventions too: unscale_in_step, no fp16 gradients.
  static ScalerOptions pytorch();
  // What a policy wants: dynamic for fp16 compute (policy.loss_scaling), else none().
  static ScalerOptions for_policy(const MixedPrecisionPolicy& policy);
};

// What step() did and why.
struct StepReport {
  bool stepped = false;
  std::string reason;           // empty when stepped
  std::string first_nonfinite;  // name of the first parameter with an inf/NaN gradient
  float scale = 1.0f;           // the scale the gradients carried
};

// Everything update() and the counters depend on; round-trips exactly.
struct ScalerState {
  float scale = 65536.0f;
  int64_t growth_tracker = 0;   // consecutive finite steps since the last growth/backoff
  int64_t hysteresis_left = 1;  // overflows still tolerated before the next backoff
  int64_t steps_skipped = 0;
  int64_t steps_taken = 0;
  bool operator==(const ScalerState&) const = default;
};

class GradScaler {
 public:
  explicit GradScaler(ScalerOptions options = ScalerOptions::dynamic_defaults());

  // loss * scale (autograd-aware; the loss itself when disabled).
  Tensor scale(const Tensor& loss) const;
  // One fused pass over the optimizer's gradients: multiply by 1/scale in place (1/scale
  // computed in f64, rounded to f32, as PyTorch) and test for inf/NaN. Error if called twice
  // for an optimizer, or after its step, before update(). Unscaling f16 gradients in place
  // loses what falls below f16's range after the division (PyTorch refuses f16 here); skip
  // unscale() (step() then folds 1/scale into the optimizer's f32 math) unless you clip.
  // A disabled scaler has nothing to multiply but still tests, so that clipping by value after
  // unscale() cannot turn an inf into a finite gradient that step() would take.
  void unscale(GradientStep& opt);
  // Steps the optimizer unless a gradient is non-finite (checked here when unscale() was not
  // called, with 1/scale folded into the optimizer's own pass). Error if called twice before
  // update() or when no parameter has a gradient. grad_factor (finite, > 0) multiplies every
  // gradient as the optimizer reads it, with 1/scale: pass optim::clip_coefficient() instead
  // of clipping in place to save two passes over the gradients (for f32 gradients the same
  // bits; a bf16/f16 gradient is no longer rounded after clipping).
  // grad_norm: the 2-norm of the optimizer's gradients as stored now, with squares summed in
  // f64 (as optim::grad_norm and the numerics monitor sum them), when the caller has it for
  // clipping. A finite one proves every gradient finite, so a test step() still owes (a
  // disabled scaler's, or one without unscale() at a scale >= 1) skips its pass over them.
  // Ignored under a found-inf reduction (ranks must agree on calling it).
  StepReport step(GradientStep& opt, float grad_factor = 1.0f,
                  std::optional<double> grad_norm = std::nullopt);
  // Adjusts the scale from this iteration's non-finite flags (all optimizers) and starts the
  // next iteration. Error when no optimizer was unscaled or stepped since the last update().
  void update();
  // Sets the scale to `new_scale` (positive, finite in f32) and starts the next iteration,
  // whether or not anything was checked (torch.amp.GradScaler.update(new_scale)); the growth
  // tracker and hysteresis are left as they are. A disabled scaler only starts the iteration.
  void update(double new_scale);

  float get_scale() const { return enabled() ? state_.scale : 1.0f; }
  bool enabled() const { return options_.enabled; }
  const ScalerOptions& options() const { return options_; }
  const ScalerState& state() const { return state_; }
  void load_state(const ScalerState& state);
  // As torch.amp.GradScaler.state_dict(): one-element tensors "scale" (f32), "growth_factor",
  // "backoff_factor" (f64), "growth_interval", "_growth_tracker" (i64), plus what continues
  // mixprec's options: "hysteresis", "hysteresis_left" (i64), "min_scale", "max_scale" (f64).
  // A disabled scaler's state is empty.
  TensorMap state_dict() const;
  // Restores the scale, the tracker and the factors, interval and bounds (options() changes).
  // A disabled scaler ignores the dict, as PyTorch's does; an enabled one refuses an empty
  // dict (saved by a disabled scaler) and names a missing or malformed entry of PyTorch's
  // five; mixprec's own (hysteresis, hysteresis_left, min_scale, max_scale) may be absent, as
  // in a dict from PyTorch: those options stay and the hysteresis allowance starts full. Dicts
  // written before the factors were saved ("growth_tracker", no "_growth_tracker") keep
  // options().
  void load_state_dict(const TensorMap& dict);
  // What a checkpoint keeps: state_dict() plus the counters "steps_skipped" and "steps_taken"
  // (i64), which a disabled scaler keeps too (a bf16 run's skipped steps). Loading checks
  // everything before changing anything; absent counters stay as they are.
  TensorMap checkpoint_dict() const;
  void load_checkpoint_dict(const TensorMap& dict);
  const StepReport& last_report() const { return last_report_; }

  // Under data parallelism every rank must take the same decision: `reduce` maps this rank's
  // found-inf flag to the whole job's (an all-reduce of "any"; every rank calls it once per
  // unscale() or step() check). Null (the default): this process decides alone.
  void set_found_inf_reduction(std::function<bool(bool)> reduce) { reduce_ = std::move(reduce); }

 private:
  struct PerOptimizer {
    bool unscaled = false, stepped = false, found_inf = false;
    std::string first_nonfinite;
  };
  // Tests every gradient (multiplying in place when `write`); records the result.
  PerOptimizer& check(GradientStep& opt, bool write);
  float inv_scale() const;

  ScalerOptions options_;
  ScalerState state_;
  std::map<const GradientStep*, PerOptimizer> this_iteration_;
  std::function<bool(bool)> reduce_;
  StepReport last_report_;
};

}  // namespace mixprec::amp
