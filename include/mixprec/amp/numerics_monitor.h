// The numerics monitor: per training step, the loss scale, whether the step was skipped (and
// why), the global gradient norm, and per parameter tensor its gradient amax and the fractions
// of gradient elements that underflow or overflow FP16 at the current loss scale. Recorded as
// structured data (to_json: one object per step, for a JSONL metrics file).
//
// "Underflow" is |g * scale| < 2^-24, the smallest f16 subnormal, zeros included: in an f16
// backward pass a value below the subnormal range arrives as 0, so exact zeros are where
// underflow shows up (a parameter whose gradient is legitimately zero counts as well).
// "Overflow" is |g * scale| > 65504, the largest finite f16 (plus inf and NaN, counted apart).
//
// With an FP8 recipe, the step's FP8 operands too (amp/fp8_monitor.h names and orders them,
// amp/fp8_stats.h defines the counts): totals every step, per tensor when per_param.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "mixprec/amp/fp8_monitor.h"
#include "mixprec/amp/grad_scaler.h"
#include "mixprec/amp/gradient_step.h"

namespace mixprec::amp {

struct MonitorOptions {
  double underflow_below = 0x1p-24;  // smallest f16 subnormal
  double overflow_above = 65504.0;   // largest finite f16
  bool per_param = true;             // false: totals only
};

struct ParamNumerics {
  std::string name;
  int64_t numel = 0;
  float amax = 0;  // of the true (unscaled) gradient, finite elements
  int64_t underflow = 0, overflow = 0, nonfinite = 0;
  double underflow_fraction() const { return numel ? double(underflow) / double(numel) : 0.0; }
  double overflow_fraction() const { return numel ? double(overflow) / double(numel) : 0.0; }
};

struct StepNumerics {
  int64_t step = 0;
  float loss_scale = 1.0f;
  bool skipped = false;
  std::string skip_reason, first_nonfinite;
  double grad_norm =
      0;  // global L2 norm of the true gradients, f64 (inf if any is non-finite; null in JSON)
  int64_t numel = 0, underflow = 0, overflow = 0, nonfinite = 0;  // over all parameters
  std::vector<ParamNumerics> params;                              // when per_param
  // The FP8 operands cast in the step (none: no recipe ran, and to_json writes no fp8 keys).
  int64_t fp8_tensors = 0;
  Fp8TensorStats fp8_total;          // every FP8 operand's, merged
  std::vector<Fp8TensorRecord> fp8;  // per tensor, in order of first cast, when per_param
  std::optional<Fp8TensorRecord> fp8_first_nonfinite;  // the first whose source held inf/NaN
  std::optional<Fp8TensorRecord> fp8_first_saturated;  // the first a saturating cast clamped

  double underflow_fraction() const { return numel ? double(underflow) / double(numel) : 0.0; }
  double overflow_fraction() const { return numel ? double(overflow) / double(numel) : 0.0; }
  std::string to_json() const;
};

class NumericsMonitor {
 public:
  explicit NumericsMonitor(MonitorOptions options = {});

  // Statistics of opt's gradients as they are now. `loss_scale` is the scale the loss was
  // multiplied by; `unscaled` says whether the gradients were already divided by it (after
  // GradScaler::unscale) or still carry it.
  StepNumerics observe(int64_t step, const GradientStep& opt, float loss_scale,
                       bool unscaled) const;
  // Adds the step's FP8 figures (per tensor when per_param).
  void add_fp8(StepNumerics& numerics, const Fp8StepStats& fp8) const;
  // Adds what the scaler decided (call after GradScaler::step).
  static void add_step_report(StepNumerics& numerics, const StepReport& report);

 private:
  MonitorOptions options_;
};

}  // namespace mixprec::amp
