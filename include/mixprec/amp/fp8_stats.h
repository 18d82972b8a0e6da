// What one FP8 cast did to its tensor, for the numerics monitor: read from the high-precision
// source and its Quantized result in a pass of its own (quantize itself is not slowed; the
// pass runs only while the monitor collects, amp/fp8_monitor.h).
//
// Counted over the source's elements, each scaled by its block's stored scale exactly as the
// quantize kernels scale it (f32, x·v or x / v by the rule's form):
//   nonfinite  the source element is inf or NaN (it overflowed before the cast; the recipes'
//              amax then turns the block's scale into 0, 1 or inf, rule by rule);
//   saturated  finite, and its scaled value rounds past the format's largest finite value
//              under round-to-nearest-even: without the recipe's saturating cast it would have
//              become inf (e5m2) or NaN (e4m3fn), with it it is clamped to +-max finite.
//              A value a hair above max finite that rounds to it anyway (a dynamic scale
//              rounded up to f32) is not counted: the cast changed nothing there;
//   flushed    finite and nonzero, but stored as +-0 (below half the format's smallest
//              subnormal after scaling).
// amax is over the finite source elements; scale_min / scale_max over the stored scales (the
// rule's own form: torchao and TE multiply by them, DeepSeek-V3 and MX divide), equal for a
// tensorwise cast.
#pragma once

#include <cstdint>

#include "mixprec/backend/quantized.h"
#include "mixprec/tensor/tensor.h"

namespace mixprec::amp {

struct Fp8TensorStats {
  int64_t numel = 0;
  float amax = 0;
  float scale_min = 0, scale_max = 0;  // over the non-NaN stored scales (0 when none)
  int64_t scales = 0;                  // how many non-NaN scales they range over
  int64_t saturated = 0, flushed = 0, nonfinite = 0;

  double saturated_fraction() const { return numel ? double(saturated) / double(numel) : 0.0; }
  double flushed_fraction() const { return numel ? double(flushed) / double(numel) : 0.0; }
  // Another cast of the same tensor (a second micro-batch, a recomputed forward): counts
  // summed, amax the larger, the scale range widened.
  void merge(const Fp8TensorStats& other);
};

// The statistics of q = quantize(source, q.spec). source: 2-d f32, bf16 or f16 of q's shape
// (any strides). Throws mixprec::Error naming the shapes when they disagree.
Fp8TensorStats fp8_tensor_stats(const Tensor& source, const backend::Quantized& q);

}  // namespace mixprec::amp
