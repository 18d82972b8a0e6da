// One pass over a gradient tensor for the loss scaler and the numerics monitor: unscale in
// place and test for non-finite values, or gather the statistics of the monitor. Any floating
// dtype (f64, f32, bf16, f16); the tensor must be contiguous. Chunks are fixed, so every
// result is independent of the thread count.
#pragma once

#include <cstdint>
#include <span>
#include <vector>
#include "mixprec/backend/kernel_types.h"

#include "mixprec/tensor/tensor.h"

namespace mixprec::cpu {

// g <- g * inv_scale (rounded once into g's dtype; skipped when inv_scale == 1) and returns
// true when any result is inf or NaN (so a finite value that unscaling overflows counts too).
bool unscale_and_check(Tensor& g, float inv_scale);
// The same over many gradients in one parallel pass (map_pieces): the index of the first
// tensor holding a non-finite result, or -1. The tensors' data is written, not the handles.
int64_t unscale_and_check(std::span<const Tensor> gs, float inv_scale);
// The test alone on g * inv_scale as an optimizer reads it (f32), writing nothing.
int64_t first_nonfinite(std::span<const Tensor> gs, float inv_scale = 1.0f);
// g = min(max(g, lo), hi) in place (backend.h: clamp_in_place), in one parallel pass.
void clamp_in_place(std::span<const Tensor> gs, double lo, double hi);

using backend::GradNumerics;
// Statistics of g as it is stored; `scale` is the loss scale the thresholds apply to.
GradNumerics grad_numerics(const Tensor& g, double scale, double underflow_below,
                           double overflow_above);

using backend::GradNumericsPass;
// The statistics of many gradients in one parallel pass (map_pieces). Within a piece the
// squares go into 8 running sums (element i into lane i % 8), as optim::grad_norm adds them.
GradNumericsPass grad_numerics(std::span<const Tensor> gs, double scale, double underflow_below,
                               double overflow_above);

}  // namespace mixprec::cpu
